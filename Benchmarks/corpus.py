#!/usr/bin/python3
"""Stores the same N searchable records in batond and in Zeitgeist, for Search against FindEvents.

Record i is titled "Note i" in both: an activity of type com.example.corpus.note
(searchable, keyword "corpus") and a Zeitgeist event whose subject text is "Note i".
Usage: corpus.py N [--baton-only]   (on the bus in DBUS_SESSION_BUS_ADDRESS; needs python3-dbus)
With --baton-only, Zeitgeist is left out (Benchmarks/instructions measures batond alone).
"""
import sys
import time

import dbus

count = int(sys.argv[1])
baton_only = sys.argv[2:] == ["--baton-only"]
bus = dbus.SessionBus()
baton = bus.get_object("org.baton.Handoff1", "/org/baton/Handoff1")
registry = dbus.Interface(baton, "org.baton.Handoff1.Registry")
activities = dbus.Interface(baton, "org.baton.Handoff1.Activities")

registry.RegisterActivityType("com.example.corpus.note", "com.example.corpus", {"title": "Note"})
for i in range(count):
    activities.Advertise("com.example.corpus.note", f"Note {i}", '{"id":"%d"}' % i,
                         {"keywords": "corpus", "eligible_for_search": "true"})
if baton_only:
    sys.exit(0)

zeitgeist = dbus.Interface(bus.get_object("org.gnome.zeitgeist.Engine", "/org/gnome/zeitgeist/log/activity"),
                           "org.gnome.zeitgeist.Log")
ZG = "http://www.zeitgeist-project.com/ontologies/2010/01/27/zg#"
now = int(time.time() * 1000)
batch = []
for i in range(count):
    batch.append((["", str(now + i), ZG + "AccessEvent", ZG + "UserActivity", "application://baton-corpus.desktop", ""],
                  [[f"baton-corpus://note/{i}", "", "", "", "application/json", f"Note {i}", "", "", ""]],
                  dbus.ByteArray(b'{"id":"%d"}' % i)))
    if len(batch) == 200 or i == count - 1:
        zeitgeist.InsertEvents(batch, signature="a(asaasay)")
        batch = []
