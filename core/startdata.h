/* startdata.h - where the code and data a start runs and touches go.
 * FN_START_DATA, for a static variable that a start of a
 * process under the shim writes (or first reads). Such variables share one
 * section, so that a start touches one page of them: each page a process
 * touches first costs a page fault, and in a virtual machine a fault costs
 * about as much as 10,000 instructions (issue 42: the start's scattered
 * variables were eleven of its thirty faults). Only small variables belong
 * here: a path is kept in core/startmem.c's block. tests/layout/
 * check_layout.py checks that the section fits in a page, and that the
 * FN_START_TEXT functions lie in the first 32 KiB of code. */
#ifndef FAULTNET_STARTDATA_H
#define FAULTNET_STARTDATA_H

#define FN_START_DATA __attribute__((section("fn_start_data")))

/* FN_START_TEXT, for a function that every start under the shim runs but
 * that is called later too (so the compiler does not put it with the
 * constructor's own code, in .text.startup): the link puts it there all
 * the same, near the start of the library's code. A fault on a page of a
 * cached file maps the pages around it too, within 64 KiB of address
 * space: the start's code, in one stretch of a few pages, is then mapped
 * by one or two faults, where spread over the library it took five. */
#define FN_START_TEXT __attribute__((section(".text.startup.faultnet")))

/* FN_FAR_RODATA, for a large constant no start reads (a buffer of zeros
 * to write): preload/startdata.ld puts such constants after the others,
 * so that those stay within the aligned 64 KiB that the loader's first
 * fault in the library's first segment maps at every load (88 KiB of
 * zeros would push them past it). */
#define FN_FAR_RODATA __attribute__((section("fn_far_rodata")))

#endif
