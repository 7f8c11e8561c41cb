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
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct found {
	ElfW(Addr) base, lo, hi;
};

/* The library's writable segment: its part past the file's bytes. */
static int shim_bss(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct found *f = arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libfaultnet.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && ph->p_memsz > ph->p_filesz) {
			f->base = info->dlpi_addr;
			f->lo = info->dlpi_addr + ph->p_vaddr + ph->p_filesz;
			f->hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		}
	}
	return 1;
}

int main(void)
{
	struct found f = {0, 0, 0};
	dl_iterate_phdr(shim_bss, &f);
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
