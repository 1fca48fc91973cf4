"""The system libraries Qt's X11 platform plugin (xcb) loads, and which of them this machine lacks.

Without one of them Qt does not raise: it prints a line about the plugin and aborts the process.
The editor asks first, so that a user who set blockflow up with ``./dev.sh test`` or plain pip
gets the exact Debian packages to install instead of a core dump.
"""
from __future__ import annotations

import ctypes
import os
import sys

#: (shared object, the Debian package that provides it): what PySide6's xcb plugin links to,
#: the same list as dev.sh's XCB_PACKAGES.
XCB_LIBRARIES = (
    ("libX11-xcb.so.1", "libx11-xcb1"), ("libxcb.so.1", "libxcb1"),
    ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-image.so.0", "libxcb-image0"), ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxcb-randr.so.0", "libxcb-randr0"), ("libxcb-render.so.0", "libxcb-render0"),
    ("libxcb-render-util.so.0", "libxcb-render-util0"), ("libxcb-shape.so.0", "libxcb-shape0"),
    ("libxcb-shm.so.0", "libxcb-shm0"), ("libxcb-sync.so.1", "libxcb-sync1"),
    ("libxcb-util.so.1", "libxcb-util1"), ("libxcb-xfixes.so.0", "libxcb-xfixes0"),
    ("libxcb-xkb.so.1", "libxcb-xkb1"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
)


def uses_xcb(environ=None) -> bool:
    """Will Qt open windows through X11 here? Linux, and QT_QPA_PLATFORM says xcb, or says nothing
    while an X display (and no Wayland one) is set."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return False
    platform = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if platform:
        return platform == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def _loads(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing_xcb_packages() -> list[str]:
    """The Debian packages whose library the xcb plugin needs and the dynamic loader cannot find."""
    return [package for soname, package in XCB_LIBRARIES if not _loads(soname)]


def missing_xcb_message(packages: list[str]) -> str:
    """What to tell a user whose machine lacks ``packages``, in their words: what, and the command."""
    names = " ".join(packages)
    return (f"the editor cannot open a window: Qt's X11 plugin needs system libraries this "
            f"machine lacks, from the Debian packages {', '.join(packages)}. Install them with\n\n"
            f"    sudo apt-get install -y --no-install-recommends {names}\n\n"
            f"(./dev.sh run and ./dev.sh test install them when run as root), or draw the page "
            f"without a window: blockflow render PROJECT -o page.png")
