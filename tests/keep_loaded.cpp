// Preloaded into every test program of the sanitizer build: dlclose() does
// nothing, so every shared library stays mapped until the process ends.
// Mesa's GL driver allocates a few blocks it never frees, and the X and GL
// libraries unload it at exit, before LeakSanitizer looks: a report would
// then say only "<unknown module>", which no suppression can name. Kept
// loaded, the driver's blocks stay reachable, and lsan.supp can name the
// library of any other leak.
extern "C" int dlclose(void*) { return 0; }
