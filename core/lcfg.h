/* lcfg.h - libconfig, loaded on demand with dlopen(RTLD_LOCAL).
 * The shim must not drag libconfig into the application's global symbol
 * scope (the app may link its own, different libconfig), so libconfig is
 * opened privately only while a file is parsed, then closed again. */
#ifndef FAULTNET_LCFG_H
#define FAULTNET_LCFG_H

#include <libconfig.h>

struct fn_lcfg {
	void *handle;
	void (*init)(config_t *);
	void (*destroy)(config_t *);
	int (*read_file)(config_t *, const char *);
	int (*read_string)(config_t *, const char *);
	void (*set_include_dir)(config_t *, const char *);
	int (*length)(const config_setting_t *);
	config_setting_t *(*elem)(const config_setting_t *, unsigned int);
	config_setting_t *(*member)(const config_setting_t *, const char *);
	const char *(*get_string)(const config_setting_t *);
	long long (*get_int64)(const config_setting_t *);
	double (*get_float)(const config_setting_t *);
	int (*get_bool)(const config_setting_t *);
	int (*remove)(config_setting_t *, const char *);
	int (*write_file)(config_t *, const char *);
};

/* NULL on success, else a message saying what is missing. */
const char *fn_lcfg_open(struct fn_lcfg *l);
void fn_lcfg_close(struct fn_lcfg *l);

#endif
