/* shimseg.h - one of the shim's loaded segments, found for layout.sh's
 * probes of what a start touched (bsspages.c, codepages.c). */
#ifndef FN_TEST_SHIMSEG_H
#define FN_TEST_SHIMSEG_H

#include <link.h>
#include <stdbool.h>
#include <string.h>

struct shim_seg {
	bool code; /* asked: the executable segment, else the zero-filled memory */
	ElfW(Addr) base, lo, hi;
};

/* For dl_iterate_phdr: in the struct shim_seg at arg, libfaultnet.so's
 * load address and the span asked for: its executable segment, or the
 * part of its writable one past the file's bytes. base stays 0 if the
 * library is not loaded. */
static int shim_seg(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct shim_seg *f = arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libfaultnet.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD ||
		    (f->code ? !(ph->p_flags & PF_X) : ph->p_memsz <= ph->p_filesz))
			continue;
		f->base = info->dlpi_addr;
		f->lo = info->dlpi_addr + ph->p_vaddr + (f->code ? 0 : ph->p_filesz);
		f->hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	return 1;
}

#endif
