#!/usr/bin/python3
"""What an X display shows, whole, as a PNG (for the screenshots in docs/).

    photograph-screen.py DISPLAY PATH
"""
import ctypes
import ctypes.util
import os
import sys

REPOSITORY = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..")
sys.path[:0] = [os.path.join(REPOSITORY, "apps", "hawk-notes-gtk"), os.path.join(REPOSITORY, "python")]
from test_hawk_notes_gtk import photograph  # noqa: E402

display, path = sys.argv[1], sys.argv[2]
x11 = ctypes.CDLL(ctypes.util.find_library("X11"))
x11.XOpenDisplay.restype = ctypes.c_void_p
x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
x11.XDefaultRootWindow.restype = ctypes.c_ulong
x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
connection = x11.XOpenDisplay(display.encode())
if not connection:
    sys.exit("cannot open display " + display)
root = x11.XDefaultRootWindow(connection)
x11.XCloseDisplay(connection)
photograph(display, root, path)
