/* A plugin stand-in that needs libaorta_fake_vendor.so (fake_vendor.c). */
int aorta_fake_vendor(void);
int aorta_fake_plugin(void);

int aorta_fake_plugin(void)
{
    return aorta_fake_vendor();
}
