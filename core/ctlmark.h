/* ctlmark.h - how faultctl marks itself to the shim: an ELF note in its
 * own program headers. A faultctl started with LD_PRELOAD still set (from
 * a shimmed shell, by a test) must neither join a group nor become the
 * target of its own change; the shim reads the note from the main
 * program's headers (getauxval), with no lookup, allocation or system
 * call, where a failed dlsym cost a start a tenth of `true`'s time. */
#ifndef FAULTNET_CTLMARK_H
#define FAULTNET_CTLMARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FN_CTLMARK_NAME "faultnet"
#define FN_CTLMARK_TYPE 0x6374 /* "ct" */

struct fn_ctlmark {
	uint32_t namesz, descsz, type;
	char name[12]; /* "faultnet" and its NUL, padded to 4 bytes */
	char desc[4];
};

/* faultctl's note, as the linker puts it in a PT_NOTE segment. */
#define FN_CTLMARK_DEFINE                                                         \
	__attribute__((used, section(".note.faultnet.ctl"),                       \
		       aligned(4))) static const struct fn_ctlmark fn_ctlmark = { \
	    sizeof(FN_CTLMARK_NAME), 4, FN_CTLMARK_TYPE, FN_CTLMARK_NAME, "ctl"}

/* True when the ELF notes in p[0 .. len) hold faultctl's mark. Reads
 * nothing past len, whatever the notes' sizes say (the shim reads the
 * main program's notes in memory, faultctl another process's from its
 * file). */
static inline bool fn_ctlmark_find(const uint8_t *p, size_t len)
{
	size_t at = 0;
	while (at <= len && len - at >= 12) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, p + at, 4);
		memcpy(&descsz, p + at + 4, 4);
		memcpy(&type, p + at + 8, 4);
		size_t name = at + 12, nlen = ((size_t)namesz + 3) & ~(size_t)3,
		       dlen = ((size_t)descsz + 3) & ~(size_t)3;
		if (nlen > len - name)
			return false;
		if (type == FN_CTLMARK_TYPE && namesz == sizeof(FN_CTLMARK_NAME) &&
		    memcmp(p + name, FN_CTLMARK_NAME, sizeof(FN_CTLMARK_NAME)) == 0)
			return true;
		if (dlen > len - name - nlen)
			return false;
		at = name + nlen + dlen;
	}
	return false;
}

#endif
