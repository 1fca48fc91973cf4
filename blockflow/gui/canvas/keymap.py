"""The canvas's own keys, as one table: DiagramView's key handling looks keys up here, and Help >
Keyboard Shortcuts lists this same table, so the list cannot drift from what the keys do.

An entry names what it calls: a method of the view (``"zoom_in"``) or of its keyboard navigation
(``"keyboard.select_next"``, keyboard.py). Keys are portable texts (``"Ctrl+D"``, ``"Shift+Left"``)
or standard keys (QKeySequence.StandardKey: the platform's own Copy, Zoom In, ...). Tab is not
here: it opens the add-block search.
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QKeyCombination, Qt
from PySide6.QtGui import QKeySequence

__all__ = ["CanvasKey", "CANVAS_KEYS", "CANVAS_GESTURES", "key_for", "canvas_rows", "key_text"]

K = QKeySequence.StandardKey


@dataclass(frozen=True)
class CanvasKey:
    """One canvas key: ``keys`` any of which calls ``action``; ``does`` says what for the list;
    ``shown`` replaces the keys' own text there (a key held while dragging)."""

    action: str
    keys: tuple
    does: str
    shown: str = ""
    #: also taken while auto-repeating (held down); the others act once per press
    repeats: bool = False


#: every key the canvas handles itself, in the order the shortcut list shows them
CANVAS_KEYS: tuple[CanvasKey, ...] = (
    CanvasKey("hold_space", ("Space",), "pan the page: hold Space and drag with the left button",
              shown="Space (hold) + drag"),
    CanvasKey("zoom_in", (K.ZoomIn, "+", "Shift++"), "zoom in", repeats=True),
    CanvasKey("zoom_out", (K.ZoomOut, "-"), "zoom out", repeats=True),
    CanvasKey("delete_selection", ("Del", "Backspace"), "delete the selected blocks and wires (or the "
              "reroute point or frame clicked: a frame's blocks stay)"),
    CanvasKey("escape", ("Esc",), "cancel the wire being drawn or the blocks being dragged (they go "
              "back); else drop the port focus or the selection; else close the composite instance "
              "shown (go up)"),
    CanvasKey("copy_selection", (K.Copy,), "copy the selected blocks"),
    CanvasKey("cut_selection", (K.Cut,), "cut the selected blocks"),
    CanvasKey("paste", (K.Paste,), "paste at the cursor, beside the blocks there"),
    CanvasKey("select_all", (K.SelectAll,), "select every block"),
    CanvasKey("duplicate_selection", ("Ctrl+D",), "duplicate the selected blocks"),
    CanvasKey("toggle_collapse", ("H",), "collapse the selected blocks to their title and ports, or "
              "expand them when all are collapsed"),
    CanvasKey("help_at_cursor", ("F1",), "show the block under the cursor (else the selected one) "
              "in the Block Reference"),
    CanvasKey("keyboard.select_next", ("]",), "select the next block, in wire order"),
    CanvasKey("keyboard.select_previous", ("[",), "select the previous block, in wire order"),
    CanvasKey("keyboard.move_left", ("Left",), "move the selection left one grid step (a wire "
              "being drawn from the keyboard: the previous target port)", repeats=True),
    CanvasKey("keyboard.move_right", ("Right",), "move the selection right one grid step (a wire "
              "being drawn: the next target port)", repeats=True),
    CanvasKey("keyboard.move_up", ("Up",), "move the selection up one grid step (a wire being "
              "drawn: the previous target port)", repeats=True),
    CanvasKey("keyboard.move_down", ("Down",), "move the selection down one grid step (a wire "
              "being drawn: the next target port)", repeats=True),
    CanvasKey("keyboard.jump_left", ("Shift+Left",), "move the selection left five grid steps", repeats=True),
    CanvasKey("keyboard.jump_right", ("Shift+Right",), "move the selection right five grid steps", repeats=True),
    CanvasKey("keyboard.jump_up", ("Shift+Up",), "move the selection up five grid steps", repeats=True),
    CanvasKey("keyboard.jump_down", ("Shift+Down",), "move the selection down five grid steps", repeats=True),
    CanvasKey("keyboard.next_port", ("P",), "focus the next port of the selected block (a wire "
              "being drawn: the next target port)"),
    CanvasKey("keyboard.previous_port", ("Shift+P",), "focus the previous port of the selected block "
              "(a wire being drawn: the previous target port)"),
    CanvasKey("keyboard.enter", ("Return", "Enter"), "start a wire from the focused port; while "
              "drawing one, connect it to the chosen target port"),
)


#: what the canvas does with the mouse, and keys that other parts of it take before the view sees
#: them (Tab goes to the add-block popup's event filter, quickadd.py): listed, not dispatched here
CANVAS_GESTURES: tuple[tuple[str, str], ...] = (
    ("Tab", "open the add-block search at the cursor (type, then Enter; Esc closes it)"),
    ("Right-click on empty canvas", "the add-block search there, with Paste, Select all, Lay out, "
     "Fit and the full block menu at its foot"),
    ("Drag a wire to empty canvas", "the add-block search, showing the blocks that fit the wire; "
     "the one chosen is added and wired"),
    ("Drag a block onto a wire", "put it into the wire (the wire lights when the block fits)"),
    ("Alt + drag a block", "take it out of its chain, rewiring what fed it to what it fed"),
)


def _combination(event) -> QKeySequence:
    """The event's key as a one-key sequence, the keypad flag dropped (keypad arrows and + are
    the same keys to the canvas)."""
    mods = event.modifiers() & ~Qt.KeypadModifier
    return QKeySequence(QKeyCombination(mods, Qt.Key(event.key())))


def matches(entry: CanvasKey, event) -> bool:
    combo = None
    for key in entry.keys:
        if isinstance(key, QKeySequence.StandardKey):
            if event.matches(key):
                return True
            continue
        if combo is None:
            combo = _combination(event)
        if combo == QKeySequence(key):
            return True
    return False


def key_for(event) -> CanvasKey | None:
    """The entry of CANVAS_KEYS the key ``event`` calls, or None (the key is not the canvas's)."""
    for entry in CANVAS_KEYS:
        if matches(entry, event) and (entry.repeats or not event.isAutoRepeat()):
            return entry
    return None


def key_text(key) -> str:
    """One key as the platform writes it ("Ctrl+C", "⌘C"); a standard key by its first binding
    (the others are spare keys such as Ctrl+Ins, or keyboards' own Copy keys)."""
    seqs = QKeySequence.keyBindings(key)[:1] if isinstance(key, QKeySequence.StandardKey) else [QKeySequence(key)]
    return ", ".join(s.toString(QKeySequence.NativeText) for s in seqs if not s.isEmpty())


def canvas_rows() -> list[tuple[str, str]]:
    """(keys, what they do) for every canvas key, then every gesture, for the shortcut list."""
    rows = []
    for entry in CANVAS_KEYS:
        texts = []
        for key in entry.keys:
            for text in key_text(key).split(", "):
                if text and text not in texts:
                    texts.append(text)
        rows.append((entry.shown or ", ".join(texts), entry.does))
    return rows + list(CANVAS_GESTURES)
