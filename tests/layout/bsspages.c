/* bsspages.c - which pages of the shim's .bss a start has touched, for
 * layout.sh: a page a process touches first costs it a page fault, and a
 * start is meant to write only the few variables kept together in
 * fn_start_data (core/startdata.h) and core/startmem.c's block. Run under
 * LD_PRELOAD=libfaultnet.so; makes no call the shim covers. Prints one
 * line per resident page of the library's zero-filled memory (the pages
 * past the end of its file's data, mapped anonymous), as its offset from
 * the library's load address in hex; exit 2 if the library is not loaded. */
#include <link.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shimseg.h"

int main(void)
{
	struct shim_seg f = {.code = false};
	dl_iterate_phdr(shim_seg, &f);
	if (!f.base)
		return 2;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	/* The page holding the file's last bytes is the file's (the loader
	 * zeroes its tail): the anonymous pages begin after it. */
	ElfW(Addr) lo = (f.lo + page - 1) & ~(ElfW(Addr))(page - 1);
	ElfW(Addr) hi = (f.hi + page - 1) & ~(ElfW(Addr))(page - 1);
	static unsigned char vec[4096];
	for (ElfW(Addr) at = lo; at < hi; at += page * sizeof(vec)) {
		size_t len = hi - at < page * sizeof(vec) ? hi - at : page * sizeof(vec);
		if (mincore((void *)at, len, vec) != 0)
			return 2;
		for (size_t i = 0; i < (len + page - 1) / page; i++)
			if (vec[i] & 1)
				printf("%lx\n", (unsigned long)(at + i * page - f.base));
	}
	return 0;
}
