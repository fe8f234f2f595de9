/* hexbuild toolchain double: the init/fini and standalone start files (nothing to run before or
 * after main, nothing to set up). An object with no symbols. */
typedef int hexbuild_double_empty_unit;
