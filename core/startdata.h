/* startdata.h - FN_START_DATA, for a static variable that a start of a
 * process under the shim writes (or first reads). Such variables share one
 * section, so that a start touches one page of them: each page a process
 * touches first costs a page fault, and in a virtual machine a fault costs
 * about as much as 10,000 instructions (issue 42: the start's scattered
 * variables were eleven of its thirty faults). Only small variables belong
 * here: a path is kept on the heap, which the start uses anyway.
 * tests/layout/check_layout.py checks that the section fits in a page. */
#ifndef FAULTNET_STARTDATA_H
#define FAULTNET_STARTDATA_H

#define FN_START_DATA __attribute__((section("fn_start_data")))

#endif
