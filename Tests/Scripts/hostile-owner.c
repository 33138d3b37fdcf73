/* A hostile owner of the X CLIPBOARD, for the clipboard agent's tests: it takes the selection
 * and then, by MODE,
 *   targets  lists 10 000 made-up targets (text among them only past the first 9 000);
 *   silent   answers nothing at all;
 *   incr     offers UTF8_STRING and sends it by INCR, 64 KiB a chunk, up to 1 GiB;
 *   slow     is no enemy, only busy: answers each request honestly ("slow but honest"), after 2 s.
 * It prints "owner" once it owns the selection, and runs until killed.
 * Build: cc -o hostile-owner hostile-owner.c -lX11 */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: hostile-owner targets|silent|incr|slow\n"); return 2; }
    const char *mode = argv[1];
    Display *display = XOpenDisplay(NULL);
    if (!display) { fprintf(stderr, "no display\n"); return 1; }
    Window window = XCreateSimpleWindow(display, DefaultRootWindow(display), 0, 0, 1, 1, 0, 0, 0);
    Atom clipboard = XInternAtom(display, "CLIPBOARD", False), targets = XInternAtom(display, "TARGETS", False);
    Atom utf8 = XInternAtom(display, "UTF8_STRING", False), incr = XInternAtom(display, "INCR", False);
    XSetSelectionOwner(display, clipboard, window, CurrentTime);
    if (XGetSelectionOwner(display, clipboard) != window) { fprintf(stderr, "not the owner\n"); return 1; }
    printf("owner\n");
    fflush(stdout);
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    long sent = 0;
    Window requestor = None;
    Atom property = None;
    for (;;) {
        XEvent event;
        XNextEvent(display, &event);
        if (event.type == SelectionRequest && strcmp(mode, "silent") != 0) {
            XSelectionRequestEvent *request = &event.xselectionrequest;
            if (strcmp(mode, "slow") == 0) sleep(2);
            XEvent reply = {0};
            reply.xselection.type = SelectionNotify;
            reply.xselection.requestor = request->requestor;
            reply.xselection.selection = request->selection;
            reply.xselection.target = request->target;
            reply.xselection.property = request->property;
            reply.xselection.time = request->time;
            if (request->target == targets && strcmp(mode, "targets") == 0) {
                static long list[10000];
                for (int i = 0; i < 10000; i++) list[i] = (long)(100000 + i);
                list[9500] = (long)utf8;
                XChangeProperty(display, request->requestor, request->property, XA_ATOM, 32, PropModeReplace, (unsigned char *)list, 10000);
            } else if (request->target == targets) {
                long list[2] = {(long)targets, (long)utf8};
                XChangeProperty(display, request->requestor, request->property, XA_ATOM, 32, PropModeReplace, (unsigned char *)list, 2);
            } else if (request->target == utf8 && strcmp(mode, "incr") == 0) {
                long size = 1L << 30;
                requestor = request->requestor;
                property = request->property;
                XSelectInput(display, requestor, PropertyChangeMask);
                XChangeProperty(display, requestor, property, incr, 32, PropModeReplace, (unsigned char *)&size, 1);
            } else if (request->target == utf8 && strcmp(mode, "slow") == 0) {
                const char *text = "slow but honest";
                XChangeProperty(display, request->requestor, request->property, utf8, 8, PropModeReplace, (const unsigned char *)text, (int)strlen(text));
            } else {
                reply.xselection.property = None;
            }
            XSendEvent(display, request->requestor, False, 0, &reply);
            XFlush(display);
        } else if (event.type == PropertyNotify && event.xproperty.window == requestor && event.xproperty.atom == property
                   && event.xproperty.state == PropertyDelete && sent < (1L << 30)) {
            XChangeProperty(display, requestor, property, utf8, 8, PropModeReplace, (unsigned char *)chunk, sizeof chunk);
            XFlush(display);
            sent += sizeof chunk;
        }
    }
}
