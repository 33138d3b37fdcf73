// Tells Baton's extension where the reader is on this page: how far down, and a playing
// video's or recording's time, so that continuing the page elsewhere can start there.
// Reported a second after scrolling stops, and every ten seconds while media plays.
"use strict";
(() => {
  const api = globalThis.browser ?? globalThis.chrome;
  let timer = null;

  function report() {
    timer = null;
    const playing = [...document.querySelectorAll("video, audio")].find((media) => !media.paused && !media.ended);
    const position = { kind: "position", scroll: Math.round(window.scrollY) };
    if (playing) position.time = Math.floor(playing.currentTime);
    // The extension may be reloading: nothing to do then.
    Promise.resolve(api.runtime.sendMessage(position)).catch(() => {});
  }

  function reportIn(milliseconds) {
    if (timer === null) timer = setTimeout(report, milliseconds);
  }

  addEventListener("scroll", () => { clearTimeout(timer); timer = null; reportIn(1000); }, { passive: true });
  // Media events do not bubble: caught on their way down.
  document.addEventListener("timeupdate", () => reportIn(10000), true);
  for (const event of ["pause", "seeked"]) document.addEventListener(event, () => reportIn(0), true);
})();
