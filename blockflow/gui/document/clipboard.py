"""The MIME types blockflow puts on the clipboard and in drags, in one place.

The canvas (drop target, copy/paste) and the palette (drag source) both read them here, so
neither imports the other.
"""
from __future__ import annotations

# A fragment of a page: JSON of a one-page project (Document.copy_fragment writes it).
FRAGMENT_MIME = "application/x-blockflow-fragment"
# One block from the palette: the block's registered name in UTF-8.
BLOCK_MIME = "application/x-blockflow-block"
