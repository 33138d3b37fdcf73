#ifndef BATON_CMALLOC_SHIM_H
#define BATON_CMALLOC_SHIM_H

/* glibc's malloc_trim(3), which Swift's Glibc module does not bring in. */
#include <malloc.h>

#endif
