# Robustness suites: documented errors under fault injection, eviction
# against a reference model, and concurrent use. Public API only.
sb_add_test(test_errors test_errors.c testutil.c)
sb_add_test(test_eviction test_eviction.c testutil.c)
sb_add_test(test_threads test_threads.c testutil.c LIBS Threads::Threads)
