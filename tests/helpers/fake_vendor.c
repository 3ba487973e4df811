/* A vendor library the fake plugins need (tests/e2e/plugins.sh): built where
 * nothing finds it at run time, so loading them fails the way a plugin whose
 * CUDA, MPI or cairo library is missing fails. */
int aorta_fake_vendor(void);

int aorta_fake_vendor(void)
{
    return 1;
}
