/* reach.c - tells programs an LD_PRELOAD shim cannot reach: setuid and
 * setgid files (the loader drops LD_PRELOAD), static ELF files (no program
 * interpreter, so nothing is preloaded), and Go programs, static or cgo (the
 * Go runtime makes its own system calls). A script is judged by its
 * interpreter. */
#include "ctl/reach.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAY_FORWARD                                                                   \
	"; --backend=bpf (as root) faults it from the kernel, and --allow-unreached " \
	"runs it without faults"

/* cmd's path as execvp would find it; false when it is not found. */
static bool locate(const char *cmd, char *out, size_t len)
{
	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(out, X_OK) == 0;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", cmd);
		if (access(out, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

/* Where a section named name lies, or false (64-bit ELF only). */
static bool has_section(const unsigned char *m, size_t size, const char *name)
{
	const Elf64_Ehdr *eh = (const void *)m;
	if (eh->e_shoff == 0 || eh->e_shstrndx >= eh->e_shnum ||
	    eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size)
		return false;
	const Elf64_Shdr *sh = (const void *)(m + eh->e_shoff);
	const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
	for (int i = 0; i < eh->e_shnum; i++) {
		size_t off = strs->sh_offset + sh[i].sh_name;
		if (off + strlen(name) + 1 <= size && strcmp((const char *)m + off, name) == 0)
			return true;
	}
	return false;
}

/* "static", "go" or NULL for a 64-bit ELF file mapped at m. */
static const char *elf_kind(const unsigned char *m, size_t size)
{
	const Elf64_Ehdr *eh = (const void *)m;
	if (size < sizeof(*eh) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phoff + (size_t)eh->e_phnum * sizeof(Elf64_Phdr) > size)
		return NULL;
	if (has_section(m, size, ".go.buildinfo") ||
	    memmem(m, size, "\xff Go buildinf:", 14) != NULL)
		return "go";
	const Elf64_Phdr *ph = (const void *)(m + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_INTERP)
			return NULL;
	return eh->e_type == ET_EXEC || eh->e_type == ET_DYN ? "static" : NULL;
}

static const char *judge(const char *path, char *why, size_t len, int depth)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size < 4) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (sb.st_mode & (S_ISUID | S_ISGID)) {
		close(fd);
		snprintf(why, len, "%s is set%cid: the loader drops LD_PRELOAD for it" WAY_FORWARD,
			 path, sb.st_mode & S_ISUID ? 'u' : 'g');
		return why;
	}
	size_t size = (size_t)sb.st_size;
	unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	const char *res = NULL;
	if (memcmp(m, ELFMAG, SELFMAG) == 0) {
		const char *kind = elf_kind(m, size);
		if (kind && strcmp(kind, "go") == 0)
			snprintf(
			    why, len,
			    "%s is a Go program: the Go runtime makes its own system calls, so "
			    "the shim never sees its sockets" WAY_FORWARD,
			    path);
		else if (kind)
			snprintf(why, len,
				 "%s is a static binary: it has no program interpreter, so nothing "
				 "is preloaded into it" WAY_FORWARD,
				 path);
		res = kind ? why : NULL;
	} else if (m[0] == '#' && m[1] == '!' && depth < 4) {
		char interp[PATH_MAX];
		size_t i = 2, n = 0;
		while (i < size && (m[i] == ' ' || m[i] == '\t'))
			i++;
		while (i < size && n + 1 < sizeof(interp) && m[i] != ' ' && m[i] != '\t' &&
		       m[i] != '\n')
			interp[n++] = (char)m[i++];
		interp[n] = '\0';
		res = n ? judge(interp, why, len, depth + 1) : NULL;
	}
	munmap(m, size);
	return res;
}

const char *fn_unreached(const char *cmd, char *why, size_t len)
{
	char path[PATH_MAX];
	if (!locate(cmd, path, sizeof(path)))
		return NULL;
	return judge(path, why, len, 0);
}
