// KDE Frameworks' runner model (org.kde.runnermodel, what KRunner and Plasma's search load),
// offscreen: loads the D-Bus runners from krunner/dbusplugins in the XDG data directories,
// sends a query, and prints each match as `match {JSON}` (text, runner, type, relevance) on
// stderr once the runners have answered; with "run", runs the first of Baton's matches
// (its default action, as Enter does) and prints `ran N`. Quits after 30 s at the latest.
// qmlscene takes no arguments for the scene: the query comes from query.js beside this file
// (`var query = "…"; var run = true;`), which the test writes.
//
//   QT_QPA_PLATFORM=offscreen qmlscene krunner-query.qml
import QtQml 2.2
import QtQml.Models 2.14
import org.kde.runnermodel 2.0 as RunnerModels
import "query.js" as Query

QtObject {
    id: root
    property int quietTicks: 0
    property var model: RunnerModels.RunnerModel {}
    property var rows: Instantiator {
        model: root.model
        delegate: QtObject {
            readonly property var match: ({text: model.display, runner: model.runnerid, type: model.type, relevance: model.relevance})
        }
    }
    // Set after start: single-runner mode and an early query reset the query to "".
    property var start: Timer { interval: 300; running: true; onTriggered: root.model.query = Query.query }
    property var settle: Timer {
        interval: 250; repeat: true; running: true
        onTriggered: {
            if (root.model.query === "" || root.model.running || root.model.count === 0) return;
            // Runners answer one by one: done once the count has held for a second.
            if (++root.quietTicks < 4) return;
            var first = -1;
            for (var i = 0; i < root.rows.count; i++) {
                var match = root.rows.objectAt(i).match;
                console.log("match " + JSON.stringify(match));
                if (first < 0 && match.runner === "org.baton.Handoff1") first = i;
            }
            if (Query.run && first >= 0) {
                root.model.run(first);
                console.log("ran " + first);
            }
            Qt.quit();
        }
    }
    property var deadline: Timer { interval: 30000; running: true; onTriggered: { console.log("no matches in 30 s"); Qt.quit(); } }
}
