// The options page: the sites never recorded, and how the connection to Baton stands.
"use strict";
const api = globalThis.browser ?? globalThis.chrome;
const sites = document.getElementById("sites");
const status = document.getElementById("status");

/** The host names typed, one per line: an address pasted whole counts as its host. */
function parseSites(text) {
  return text.split("\n").map((line) => line.trim().toLowerCase()).filter((line) => line !== "").map((line) => {
    try {
      return new URL(line.includes("://") ? line : "https://" + line).hostname;
    } catch {
      return line;
    }
  });
}

function showStatus({ status: text }) {
  status.textContent = text === "connected" ? "Connected: pages are being recorded." : text ?? "Nothing sent yet.";
  status.classList.toggle("problem", text !== undefined && text !== "connected");
}

api.storage.local.get(["blockedSites", "status"]).then((stored) => {
  sites.value = (stored.blockedSites ?? []).join("\n");
  showStatus(stored);
});
api.storage.onChanged.addListener((changes) => {
  if (changes.status) showStatus({ status: changes.status.newValue });
});
document.getElementById("save").addEventListener("click", async () => {
  const blockedSites = [...new Set(parseSites(sites.value))];
  await api.storage.local.set({ blockedSites });
  sites.value = blockedSites.join("\n");
  document.getElementById("saved").textContent = "Saved.";
});
