// Debian's libwayland-client (libwayland-dev's headers), found at run time rather than linked,
// as libX11 is (Sources/CX11/shim.h): only the clipboard agent speaks Wayland, and it is the same
// program as batond, which must not carry a display library (docs/DESIGN.md, "The clipboard").
//
// The protocols' interface tables are generated at build time by wayland-scanner (the
// WaylandScanner plugin) from Wayland's core protocol and from our own descriptions of the two
// data-control protocols in protocols/. The agent marshals requests by opcode with
// wl_proxy_marshal_array_flags and hears events through one dispatcher per object, so it needs
// none of the scanner's inline client functions, which would call libwayland-client directly.
#ifndef BATON_CWAYLAND_H
#define BATON_CWAYLAND_H

#include <stdint.h>
#include <wayland-client-core.h>
#include <wayland-util.h>

// The libwayland-client functions the agent calls, each with its library's own prototype.
struct baton_wayland {
#define BATON_WAYLAND_FUNCTIONS(X) \
    X(wl_display_connect) X(wl_display_disconnect) X(wl_display_get_fd) X(wl_display_dispatch_pending) \
    X(wl_display_roundtrip) X(wl_display_flush) X(wl_display_prepare_read) X(wl_display_read_events) \
    X(wl_display_cancel_read) X(wl_display_get_error) X(wl_proxy_marshal_array_flags) X(wl_proxy_add_dispatcher) \
    X(wl_proxy_destroy) X(wl_proxy_get_version)
#define BATON_WAYLAND_FIELD(name) __typeof__(&name) _Nonnull name;
    BATON_WAYLAND_FUNCTIONS(BATON_WAYLAND_FIELD)
#undef BATON_WAYLAND_FIELD
};

// Loads libwayland-client.so.0 and finds its functions, once: the table, or NULL with
// dlerror's text in *error. Called from one thread at a time.
const struct baton_wayland *_Nullable baton_wayland_load(const char *_Nullable *_Nonnull error);

// The interface tables the agent names, by protocol: index 0 is ext-data-control-v1, 1 is
// wlr-data-control-unstable-v1 (Swift cannot take the address of the scanner's constants).
struct baton_wayland_interfaces {
    const struct wl_interface *_Nonnull registry;
    const struct wl_interface *_Nonnull seat;
    const struct wl_interface *_Nonnull manager[2];
    const struct wl_interface *_Nonnull device[2];
    const struct wl_interface *_Nonnull source[2];
    const struct wl_interface *_Nonnull offer[2];
};
const struct baton_wayland_interfaces *_Nonnull baton_wayland_interfaces(void);

// A pipe whose two ends close on exec (pipe2 with O_CLOEXEC, which Swift's Glibc does not show).
int baton_wayland_pipe(int fds[_Nonnull 2]);

// The eventfd that wakes the agent's thread (non-blocking, closed on exec).
int baton_wayland_wake_descriptor(void);

// A display is a proxy too (for wl_display.get_registry).
static inline struct wl_proxy *_Nonnull baton_wayland_display_proxy(struct wl_display *_Nonnull display) {
    return (struct wl_proxy *)display;
}

#endif
