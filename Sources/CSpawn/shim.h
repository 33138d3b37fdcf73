#ifndef BATON_CSPAWN_SHIM_H
#define BATON_CSPAWN_SHIM_H

#include <spawn.h>

/* glibc's posix_spawn_file_actions_addchdir_np(3) (2.29 and later), which <spawn.h> declares only
   under _GNU_SOURCE and Swift's Glibc module therefore lacks: the child starts in a directory. */
extern int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *__restrict actions, const char *__restrict path);

#endif
