// Debian's libX11 and libXfixes (libx11-dev's and libxfixes-dev's headers), found at run time
// rather than linked: see baton_x11_load. Only the clipboard agent uses them, and it is the same
// program as batond, which must not carry a display library (docs/DESIGN.md, "The clipboard").
#ifndef BATON_CX11_SHIM_H
#define BATON_CX11_SHIM_H

#include <dlfcn.h>
#include <poll.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <X11/Xlib.h>
#include <X11/Xatom.h>
#include <X11/extensions/Xfixes.h>

// The Xlib and XFixes functions the agent calls, each with its library's own prototype.
struct baton_x11 {
#define BATON_X11_FUNCTIONS(X) \
    X(XOpenDisplay) X(XCloseDisplay) X(XConnectionNumber) X(XDefaultRootWindow) X(XCreateSimpleWindow) \
    X(XDestroyWindow) X(XInternAtom) X(XSelectInput) X(XPending) X(XNextEvent) X(XFlush) X(XSync) \
    X(XConvertSelection) X(XGetWindowProperty) X(XDeleteProperty) X(XChangeProperty) X(XFree) \
    X(XSetSelectionOwner) X(XGetSelectionOwner) X(XSendEvent) X(XSetErrorHandler) X(XSetIOErrorHandler) \
    X(XExtendedMaxRequestSize) X(XMaxRequestSize)
#define BATON_XFIXES_FUNCTIONS(X) X(XFixesQueryExtension) X(XFixesSelectSelectionInput)
#define BATON_X11_FIELD(name) __typeof__(&name) _Nonnull name;
    BATON_X11_FUNCTIONS(BATON_X11_FIELD)
    BATON_XFIXES_FUNCTIONS(BATON_X11_FIELD)
#undef BATON_X11_FIELD
};

// Loads libX11.so.6 and libXfixes.so.3 and finds their functions, once: the table, or NULL
// with dlerror's text in *error. Called from one thread at a time.
static inline const struct baton_x11 *_Nullable baton_x11_load(const char *_Nullable *_Nonnull error) {
    static struct baton_x11 functions;
    static int loaded;
    if (loaded) return &functions;
    void *x11 = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL);
    void *xfixes = x11 == NULL ? NULL : dlopen("libXfixes.so.3", RTLD_NOW | RTLD_LOCAL);
    if (x11 == NULL || xfixes == NULL) {
        *error = dlerror();
        return NULL;
    }
#define BATON_X11_FIND(name) \
    if ((*(void **)&functions.name = dlsym(x11, #name)) == NULL) { *error = dlerror(); return NULL; }
#define BATON_XFIXES_FIND(name) \
    if ((*(void **)&functions.name = dlsym(xfixes, #name)) == NULL) { *error = dlerror(); return NULL; }
    BATON_X11_FUNCTIONS(BATON_X11_FIND)
    BATON_XFIXES_FUNCTIONS(BATON_XFIXES_FIND)
#undef BATON_X11_FIND
#undef BATON_XFIXES_FIND
    loaded = 1;
    return &functions;
}

// The XFixes event of a selection's new owner, from an event whose type is the extension's
// base + XFixesSelectionNotify (Swift cannot cast between the C structs itself).
static inline XFixesSelectionNotifyEvent baton_xfixes_selection_event(const XEvent *_Nonnull event) {
    return *(const XFixesSelectionNotifyEvent *)event;
}

// An X error (a requestor window gone before the answer, say) is no reason to exit, as Xlib's
// default handler would: the request it answers simply failed.
static inline int baton_x11_ignore_error(Display *_Nullable display, XErrorEvent *_Nullable event) {
    (void)display; (void)event;
    return 0;
}

// The display went away (the X server ended, the session closed): Xlib cannot go on after this
// handler returns, so the agent ends here, saying why, with status 0 (nothing failed).
static inline int baton_x11_display_gone(Display *_Nullable display) {
    (void)display;
    static const char said[] = "baton clipboard-agent: the X display went away; stopping\n";
    (void)!write(2, said, sizeof said - 1);
    _exit(0);
}
#endif
