"""Tests of the Python client against the real batond on the bus DBUS_SESSION_BUS_ADDRESS names
(PythonClientTests starts both): /usr/bin/python3 -m unittest -v test_baton"""

import os
import threading
import unittest
import uuid

from gi.repository import GLib

import baton

TYPE = "com.example.py.document"
APP = "com.example.py"


class HandlerThread(threading.Thread):
    """An app's handler serving on a main loop of its own, as a GTK app's main loop would."""

    def __init__(self, app_id, bus_name, types):
        super().__init__(daemon=True)
        self.app_id, self.bus_name, self.types = app_id, bus_name, types
        self.ready = threading.Event()
        self.continued = []
        self.continued_event = threading.Event()
        self.failure = None

    def run(self):
        context = GLib.MainContext.new()
        context.push_thread_default()
        try:
            client = baton.Client(os.environ["DBUS_SESSION_BUS_ADDRESS"])
            handler = baton.Handler(client, self.app_id, self.bus_name, path="/com/example/py")
            for type, function in self.types.items():
                handler.on_continue(type, function, required_keys=["id"])
            handler.on_continued = self.note_continued
            handler.start()
        except Exception as error:  # reported by the test, not lost in the thread
            self.failure = error
            self.ready.set()
            return
        self.loop = GLib.MainLoop(context)
        self.ready.set()
        self.loop.run()

    def note_continued(self, id, scene, device):
        self.continued.append((id, scene, device))
        self.continued_event.set()

    def stop(self):
        self.loop.get_context().invoke_full(GLib.PRIORITY_DEFAULT, self.loop.quit)
        self.join(5)


class ClientTests(unittest.TestCase):
    def setUp(self):
        self.client = baton.Client()
        self.client.register_type(TYPE, APP, title="Document", required_keys=["id"])

    def test_activities_round_trip(self):
        id = self.client.advertise(TYPE, "Chapter 3", {"id": "c3", "words": 1200}, keywords=["draft", "novel"], searchable=True,
                                   target_content_id="c3")
        record = self.client.get(id)
        self.assertEqual(record["title"], "Chapter 3")
        self.assertEqual(record["payload"], {"id": "c3", "words": 1200})
        self.assertEqual(record["keywords"], ["draft", "novel"])
        self.assertIn(id, [a["id"] for a in self.client.list(type=TYPE)])
        self.assertEqual([a["id"] for a in self.client.list(id_prefix=id[:30])], [id])
        self.assertEqual([a["id"] for a in self.client.search("nov")], [id])

        self.client.update(id, {"words": 1300}, title="Chapter 3, revised")
        self.assertEqual(self.client.get(id)["payload"], {"id": "c3", "words": 1300})
        self.client.update(id, {"id": "c3"}, replace=True)
        self.assertEqual(self.client.get(id)["payload"], {"id": "c3"})
        self.assertTrue(self.client.explain(id)["continuable"])

        self.client.invalidate(id)
        with self.assertRaises(baton.BatonError) as caught:
            self.client.get(id)
        self.assertEqual(caught.exception.name, "NotFound")
        self.assertEqual([a["id"] for a in self.client.history(id_prefix=id)], [id])

    def test_errors_are_named(self):
        with self.assertRaises(baton.BatonError) as caught:
            self.client.advertise("com.example.py.nope", "x", {})
        self.assertEqual(caught.exception.name, "UnknownActivityType")
        with self.assertRaises(baton.BatonError) as caught:
            self.client.advertise(TYPE, "no id", {"words": 1})
        self.assertEqual(caught.exception.name, "InvalidPayload")
        self.assertIn("id", caught.exception.message)

    def test_a_repeated_request_id_stores_once(self):
        request = str(uuid.uuid4())
        title = "once " + request
        first = self.client.advertise(TYPE, title, {"id": "r"}, request_id=request)
        second = self.client.advertise(TYPE, title, {"id": "r"}, request_id=request)
        self.assertEqual(first, second)
        self.assertEqual([a["id"] for a in self.client.list(type=TYPE) if a["title"] == title], [first])

    def test_scene_storage_keeps_each_kind(self):
        scene = self.client.open_scene(APP, title="Window 1")
        values = {"flag": True, "count": 42, "ratio": 0.5, "draft": "007", "blob": b"\x00\xff"}
        for key, value in values.items():
            scene.set(key, value)
        for key, value in values.items():
            got = scene.get(key)
            self.assertEqual((got, type(got)), (value, type(value)), key)
        self.assertEqual(scene.all(), values)
        scene.remove("draft")
        self.assertIsNone(scene.get("draft"))
        self.assertEqual(scene.get("draft", "none"), "none")
        self.assertEqual(scene.property("Title"), "Window 1")
        self.assertIn(scene, self.client.scenes(APP))
        with self.assertRaises(TypeError):
            scene.set("bad", [1, 2])
        scene.close()
        self.assertNotIn(scene, self.client.scenes(APP))

    def test_restore_at_launch_and_after_a_clean_exit(self):
        app = "com.example.py.restore"
        scene = self.client.open_scene(app)
        self.assertEqual(self.client.restore_scenes(app), [(scene, "launch")])
        self.client.detach(app)
        self.assertEqual(self.client.restore_scenes(app), [(scene, "restore")])
        self.client.detach(app)


class HandlerTests(unittest.TestCase):
    def test_a_continuation_goes_through_the_apps_handler(self):
        def open_document(activity, scene):
            if activity["payload"]["id"] == "locked":
                raise ValueError("document locked is open elsewhere")
            return {"OpenDocument": activity["payload"]["id"], "Zoom": 1.5}

        app = HandlerThread("com.example.pyhandler", "com.example.pyhandler", {"com.example.pyhandler.document": open_document})
        app.start()
        self.assertTrue(app.ready.wait(10))
        self.assertIsNone(app.failure)
        try:
            client = baton.Client()
            id = client.advertise("com.example.pyhandler.document", "Chapter 4", {"id": "c4"})
            scene = client.continue_activity(id)
            self.assertEqual(scene.all(), {"OpenDocument": "c4", "Zoom": 1.5})
            self.assertEqual(scene.property("State"), "ready")
            self.assertEqual(scene.property("ActivityId"), id)
            # The advertising app (the type's handler here) is told, not awaited.
            self.assertTrue(app.continued_event.wait(10))
            self.assertEqual(app.continued[0][:2], (id, scene.path))

            locked = client.advertise("com.example.pyhandler.document", "Locked", {"id": "locked"})
            with self.assertRaises(baton.BatonError) as caught:
                client.continue_activity(locked)
            self.assertEqual(caught.exception.name, "HandlerFailed")
            self.assertIn("document locked is open elsewhere", caught.exception.message)
        finally:
            app.stop()


if __name__ == "__main__":
    unittest.main()
