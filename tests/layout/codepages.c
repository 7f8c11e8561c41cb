/* codepages.c - which pages of the shim's code a start has mapped, for
 * layout.sh. The first fault in a mapping of a cached file maps the 16
 * pages (64 KiB) from the mapping's start, and a later one the aligned
 * 64 KiB around it (the kernel's fault-around, clipped at a page table's
 * 2 MiB): a start whose code lies in the first 64 KiB of the shim's takes
 * one fault for it, and each function it runs from elsewhere costs one
 * more (about as much as 10,000 instructions in a virtual machine). Run
 * under LD_PRELOAD=libfaultnet.so; makes no call the shim covers, and
 * reads /proc/self/pagemap by raw system calls (read is one of the shim's
 * hooks). Prints one line per page of the library's executable segment
 * that this process has mapped, as its offset from the library's load
 * address in hex. Exit 2 if the library is not loaded or the map cannot be
 * read; 3 if the segment begins less than 64 KiB below a 2 MiB boundary
 * (its first fault then maps fewer pages: run again, at another address). */
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shimseg.h"

int main(void)
{
	struct shim_seg f = {.code = true};
	dl_iterate_phdr(shim_seg, &f);
	long map = syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (!f.base || map < 0)
		return 2;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const ElfW(Addr) pmd = 2u << 20, window = 16 * page;
	if (f.lo % pmd > pmd - window)
		return 3;
	for (ElfW(Addr) at = f.lo & ~(ElfW(Addr))(page - 1); at < f.hi; at += page) {
		uint64_t entry;
		if (syscall(SYS_pread64, map, &entry, sizeof(entry), (off_t)(at / page * 8)) !=
		    (long)sizeof(entry))
			return 2;
		if (entry >> 63) /* present in this process's page tables */
			printf("%lx\n", (unsigned long)(at - f.base));
	}
	syscall(SYS_close, map);
	return 0;
}
