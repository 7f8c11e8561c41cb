/* biaslib.c - a library linked at a fixed high address, built twice
 * (libbias_a.so, libbias_b.so): preloaded together, the second cannot have
 * the address and the loader puts it lower, its load bias "negative" (it
 * wraps). The shim's start reads the symbol tables of the objects loaded
 * after it (preload/base/elfsym.c), these two among them (hostile_app.py
 * i42.bias). */
int fn_bias_lib(void);

int fn_bias_lib(void)
{
	return 1;
}
