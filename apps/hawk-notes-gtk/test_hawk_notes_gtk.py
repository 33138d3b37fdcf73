"""The GTK Hawk Notes under Xvfb, driven through Baton and its Windows interface, against the
real batond on the bus DBUS_SESSION_BUS_ADDRESS names (GTKHawkNotesTests starts both):
/usr/bin/python3 -m unittest -v test_hawk_notes_gtk

With HAWK_NOTES_SCREENSHOTS=DIR it keeps its screenshots there (docs/ holds a pair)."""

import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import gi

gi.require_version("GdkPixbuf", "2.0")
from gi.repository import GdkPixbuf, Gio, GLib  # noqa: E402

import baton  # noqa: E402

HERE = os.path.dirname(os.path.realpath(__file__))
APP = "com.raywenderlich.hawknotes"
CHARACTER_DETAIL = APP + ".staterestore.characterDetail"
GOOD_HAWK = "f1597af6-7f54-4136-ae1d-dd470ba37d59"
BURNING_SWIFT = "9d1245ec-6db8-4ce6-b14a-e2a76bafb148"
AGATHA = "0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5"
SIGRID = "0e773c50-ae81-4611-9234-9ec676c1e16a"


def eventually(what, condition, timeout=20):
    """Waits for `condition()` to be truthy (checked every 50 ms) and returns it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except baton.BatonError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting: " + what)
        time.sleep(0.05)


class XImage(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int), ("xoffset", ctypes.c_int), ("format", ctypes.c_int),
                ("data", ctypes.POINTER(ctypes.c_ubyte)), ("byte_order", ctypes.c_int), ("bitmap_unit", ctypes.c_int),
                ("bitmap_bit_order", ctypes.c_int), ("bitmap_pad", ctypes.c_int), ("depth", ctypes.c_int),
                ("bytes_per_line", ctypes.c_int), ("bits_per_pixel", ctypes.c_int)]


def photograph(display, xid, path):
    """What the X server shows of window `xid`, as a PNG: the pixels, read with XGetImage."""
    x11 = ctypes.CDLL(ctypes.util.find_library("X11"))
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XGetImage.restype = ctypes.POINTER(XImage)
    x11.XGetImage.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                              ctypes.c_ulong, ctypes.c_int]
    x11.XGetWindowAttributes.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    connection = x11.XOpenDisplay(display.encode())
    assert connection, "cannot open display " + display
    try:
        attributes = (ctypes.c_int * 64)()  # XWindowAttributes: x, y, width, height first
        assert x11.XGetWindowAttributes(connection, int(xid), attributes)
        width, height = attributes[2], attributes[3]
        image = x11.XGetImage(connection, int(xid), 0, 0, width, height, 0xFFFFFFFF, 2).contents  # ZPixmap
        assert image.bits_per_pixel == 32, "a 24-bit screen keeps pixels in 32 bits"
        raw = ctypes.string_at(image.data, image.bytes_per_line * height)
        rgb = bytearray(width * height * 3)
        for y in range(height):
            row = raw[y * image.bytes_per_line:y * image.bytes_per_line + width * 4]
            rgb[y * width * 3:(y + 1) * width * 3] = bytes(b for i in range(0, width * 4, 4) for b in (row[i + 2], row[i + 1], row[i]))
    finally:
        x11.XCloseDisplay(connection)
    pixbuf = GdkPixbuf.Pixbuf.new_from_bytes(GLib.Bytes.new(bytes(rgb)), GdkPixbuf.Colorspace.RGB, False, 8, width, height, width * 3)
    pixbuf.savev(path, "png", [], [])


def differing_share(first, second):
    """The share of pixels that differ between two PNGs of the same size (1.0 if the sizes differ)."""
    a, b = GdkPixbuf.Pixbuf.new_from_file(first), GdkPixbuf.Pixbuf.new_from_file(second)
    if (a.get_width(), a.get_height()) != (b.get_width(), b.get_height()):
        return 1.0
    pa, pb = a.read_pixel_bytes().get_data(), b.read_pixel_bytes().get_data()
    channels, stride = a.get_n_channels(), a.get_rowstride()
    differing = sum(1 for y in range(a.get_height()) for x in range(a.get_width())
                    if pa[y * stride + x * channels:y * stride + x * channels + 3] != pb[y * stride + x * channels:y * stride + x * channels + 3])
    return differing / (a.get_width() * a.get_height())


class GTKHawkNotesTests(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="hawk-notes-gtk-")
        self.addCleanup(shutil.rmtree, self.directory, True)
        # A display of our own: Xvfb picks a free number and writes it to the pipe.
        read_end, write_end = os.pipe()
        self.xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                                     pass_fds=[write_end], stderr=subprocess.DEVNULL)
        os.close(write_end)
        self.addCleanup(self.stop, self.xvfb)
        with os.fdopen(read_end) as pipe:
            self.display = ":" + pipe.readline().strip()
        self.client = baton.Client()
        self.app = None

    def stop(self, process):
        if process.poll() is None:
            process.kill()
            process.wait(10)

    def start_app(self):
        environment = dict(os.environ, DISPLAY=self.display, GDK_BACKEND="x11", GSK_RENDERER="cairo", NO_AT_BRIDGE="1",
                           GTK_A11Y="none")
        self.app = subprocess.Popen([os.path.join(HERE, "hawk-notes-gtk")], env=environment)
        self.addCleanup(self.stop, self.app)
        return eventually("a Hawk Notes window", lambda: self.describe())

    def stop_app(self):
        self.app.send_signal(signal.SIGTERM)
        self.assertEqual(self.app.wait(20), 0)

    def windows_call(self, method, signature=None, arguments=None, reply=""):
        parameters = GLib.Variant("(%s)" % signature, arguments) if signature else None
        try:
            result = self.client.connection.call_sync(APP, "/com/raywenderlich/hawknotes", APP + ".Windows", method, parameters,
                                                      GLib.VariantType.new("(%s)" % reply), Gio.DBusCallFlags.NONE, 10000, None)
        except GLib.Error as error:
            raise baton._error(error) from None
        return result.unpack()

    def describe(self):
        return self.windows_call("Describe", reply="aa{ss}")[0]

    def act(self, scene, action, argument):
        self.windows_call("Act", "sss", (scene, action, argument))

    def screenshots(self, name):
        directory = os.path.join(self.directory, name)
        os.makedirs(directory)
        files = []
        for index, window in enumerate(self.describe()):
            files.append(os.path.join(directory, "window-%d.png" % index))
            # Photographed until two photographs in a row agree: the window has drawn its last change.
            def settled():
                photograph(self.display, window["xid"], files[-1] + ".previous")
                photograph(self.display, window["xid"], files[-1])
                return differing_share(files[-1] + ".previous", files[-1]) == 0
            eventually("window %d drawn" % index, settled)
        keep = os.environ.get("HAWK_NOTES_SCREENSHOTS")
        if keep:
            for index, file in enumerate(files):
                shutil.copy(file, os.path.join(keep, "hawk-notes-gtk-%s-%d.png" % (name, index)))
        return files

    def test_restores_after_a_restart_and_opens_a_window_for_a_continuation(self):
        [window] = self.start_app()
        self.assertEqual((window["tab"], window["character"]), ("The Good Hawk", ""))
        scene = window["scene"]

        # What a person does: a draft and the shop in the third tab, Agatha and a note in the first.
        self.act(scene, "tab", "The Burning Swift")
        self.act(scene, "draft", "Who can Lady Beatrice trust?")
        self.act(scene, "shop", "shown")
        self.act(scene, "tab", "The Good Hawk")
        self.act(scene, "character", "Agatha")
        self.act(scene, "character_note", "Agatha knows more than she says")
        storage = self.client.scene(scene).all()
        self.assertEqual(storage["ContentView.CurrentTab"], GOOD_HAWK)
        self.assertEqual(storage["BookView[%s].newNote" % BURNING_SWIFT], "Who can Lady Beatrice trust?")
        self.assertIs(storage["BookView[%s].ShowingAmazonPage" % BURNING_SWIFT], True)
        self.assertEqual(storage["BookView[%s].SelectedCharacter" % GOOD_HAWK], "b|%s::c|%s" % (GOOD_HAWK, AGATHA))
        self.assertEqual(storage["CharacterView[%s].newNote" % AGATHA], "Agatha knows more than she says")
        # Opening Agatha advertised her, as the scene's current activity.
        [agatha] = self.client.list(type=CHARACTER_DETAIL)
        self.assertEqual((agatha["title"], agatha["payload"]["id"]), ("Agatha", AGATHA))
        self.assertEqual(self.client.scene(scene).property("ActivityId"), agatha["id"])
        before = self.describe()
        [before_png] = self.screenshots("before-restart")

        # Quit and launch again: the same window, tabs, drafts and character.
        self.stop_app()
        after = self.start_app()
        self.assertEqual({k: v for k, v in after[0].items() if k != "xid"}, {k: v for k, v in before[0].items() if k != "xid"})
        [after_png] = self.screenshots("after-restart")
        self.assertLess(differing_share(before_png, after_png), 0.02, "the restored window looks as it did")
        self.act(scene, "tab", "The Burning Swift")
        [burning] = self.describe()
        self.assertEqual((burning["draft"], burning["shop"], burning["character"]), ("Who can Lady Beatrice trust?", "shown", ""))

        # Sigrid, advertised elsewhere and continued here: a new window on her, in her first book.
        sigrid = self.client.advertise(CHARACTER_DETAIL, "Sigrid", {"id": SIGRID, "name": "Sigrid"})
        continued = self.client.continue_activity(sigrid)
        windows = eventually("a second window", lambda: [w for w in self.describe() if w["scene"] == continued.path])
        self.assertEqual((windows[0]["tab"], windows[0]["character"]), ("The Broken Raven", "Sigrid"))
        self.assertEqual(len(self.describe()), 2)
        self.screenshots("continued")


if __name__ == "__main__":
    unittest.main()
