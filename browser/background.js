// Baton's browser extension: the active tab of each normal window is a Baton activity
// (type org.baton.web.page), so that the page can be continued on the user's other machines.
//
// The pages go to the native messaging host `org.baton.browser` (baton-browser-host), one frame
// per change: {"kind":"page","tab":ID,"url":…,"title":…,"scroll":…,"time":…} while the tab is
// its window's active tab, {"kind":"closed","tab":ID} once it is not (closed, another tab
// chosen, navigated somewhere not recorded). When the browser quits, the host ends them all.
//
// Never recorded: private windows, pages that are not http(s), the sites the user lists in
// the options. Runs as Chromium's service worker and as Firefox's background script alike.
"use strict";

const api = globalThis.browser ?? globalThis.chrome;
const HOST = "org.baton.browser";

/** The connection to the host, opened when there is something to send. */
let port = null;
/** Tab id → the last page frame sent for it: only its changes are sent again. */
const sent = new Map();
/** Tab id → where the reader is ({scroll, time}), as the tab's content script reports it. */
const positions = new Map();
/** The sites never recorded: host names, each also covering its subdomains. */
let blockedSites = [];

function connect() {
  if (port) return port;
  port = api.runtime.connectNative(HOST);
  port.onMessage.addListener((reply) => {
    if (reply.kind === "error") {
      console.warn(`Baton: ${reply.error}: ${reply.message}`);
      // Not recorded (refused, or batond forgot it): sent again when the page changes.
      if (reply.tab !== undefined) sent.delete(reply.tab);
      saveStatus(`${reply.error}: ${reply.message}`);
    } else if (reply.kind === "recorded") {
      saveStatus("connected");
    }
  });
  port.onDisconnect.addListener(() => {
    const error = api.runtime.lastError?.message ?? "the host ended";
    console.warn(`Baton: the native host ${HOST} disconnected: ${error}`);
    saveStatus(error);
    port = null;
    // The host ended every page it recorded: the next change records them again.
    sent.clear();
  });
  return port;
}

function post(frame) {
  try {
    connect().postMessage(frame);
  } catch (error) {
    saveStatus(String(error));
    port = null;
    sent.clear();
  }
}

/** What the options page shows: "connected", or the last error (such as "native host not found"). */
function saveStatus(status) {
  api.storage.local.set({ status, statusAt: Date.now() });
}

function isBlocked(url) {
  const host = url.hostname.toLowerCase();
  return blockedSites.some((site) => host === site || host.endsWith("." + site));
}

/** The page a tab shows, if it is one to record. */
function pageOf(tab, window) {
  if (!tab.active || tab.incognito || !window || window.incognito || window.type !== "normal") return null;
  let url;
  try {
    url = new URL(tab.url ?? "");
  } catch {
    return null;
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || isBlocked(url)) return null;
  const page = { kind: "page", tab: tab.id, url: url.href, title: tab.title ?? "" };
  const position = positions.get(tab.id);
  if (position?.url === url.href) {
    if (Number.isFinite(position.scroll)) page.scroll = position.scroll;
    if (Number.isFinite(position.time)) page.time = position.time;
  }
  return page;
}

/** Tabs closed: an event about one that was still on its way is ignored (ids are not reused). */
const closed = new Set();

/** Sends the tab's page if it changed, or ends its activity if it is no longer one to record. */
async function consider(eventTab) {
  // The event's copy of the tab may be stale by the time the browser answers: read it again.
  let tab = null;
  let window = null;
  try {
    tab = await api.tabs.get(eventTab.id);
    window = await api.windows.get(tab.windowId);
  } catch {
    // The tab or its window is closing.
  }
  if (closed.has(eventTab.id)) return;
  const page = tab && pageOf(tab, window);
  if (!page) {
    end(eventTab.id);
    return;
  }
  const key = JSON.stringify(page);
  if (sent.get(page.tab) === key) return;
  sent.set(page.tab, key);
  post(page);
}

function end(tabId) {
  if (!sent.has(tabId)) return;
  sent.delete(tabId);
  post({ kind: "closed", tab: tabId });
}

/** Every window's active tab considered again, the ones no longer active ended. */
async function considerAll() {
  const active = await api.tabs.query({ active: true });
  const ids = new Set(active.map((tab) => tab.id));
  for (const tabId of [...sent.keys()]) if (!ids.has(tabId)) end(tabId);
  for (const tab of active) await consider(tab);
}

api.tabs.onUpdated.addListener((tabId, change, tab) => {
  if (change.url !== undefined || change.title !== undefined || change.status === "complete") consider(tab);
});
api.tabs.onActivated.addListener(async ({ tabId, windowId }) => {
  for (const other of await api.tabs.query({ windowId, active: false })) end(other.id);
  consider(await api.tabs.get(tabId));
});
api.tabs.onRemoved.addListener((tabId) => {
  closed.add(tabId);
  positions.delete(tabId);
  end(tabId);
});
api.runtime.onMessage.addListener((message, sender) => {
  if (message?.kind !== "position" || !sender.tab || sender.frameId !== 0) return;
  positions.set(sender.tab.id, { url: sender.tab.url, scroll: message.scroll, time: message.time });
  consider(sender.tab);
});
api.storage.onChanged.addListener((changes, area) => {
  if (area === "local" && changes.blockedSites) {
    blockedSites = changes.blockedSites.newValue ?? [];
    considerAll();
  }
});

api.storage.local.get("blockedSites").then((stored) => {
  blockedSites = stored.blockedSites ?? [];
  considerAll();
});
