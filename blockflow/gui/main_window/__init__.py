"""The shell: the editor's main window and what it is made of (see window.py)."""
from blockflow.gui.main_window.files import MAX_RECENT, PROJECT_FILTER, read_recent_files, sample_projects
from blockflow.gui.main_window.tabs import PageTabBar
from blockflow.gui.main_window.window import MainWindow

__all__ = ["MainWindow", "PageTabBar", "sample_projects", "read_recent_files", "PROJECT_FILTER", "MAX_RECENT"]
