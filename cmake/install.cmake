# `make install PREFIX=...` and the packages (`make package`: a .deb and a
# .tar.gz). The layout is the one aorta searches relative to itself
# (core/plugin.h): bin/aorta, its plugins and attach libraries in
# lib/aorta/, the configs and examples in share/aorta/, the docs in
# share/doc/aorta/. Installed files keep the rpath entries of the vendor
# libraries outside the system's directories (CUDA's, OpenMPI's).
set(AORTA_INSTALL_SHARE share/aorta)
set(AORTA_INSTALL_DOC share/doc/aorta)

install(TARGETS aorta RUNTIME DESTINATION bin)
foreach(t aorta_attach aorta_attach_rocm)
  if(TARGET ${t})
    install(TARGETS ${t} LIBRARY DESTINATION ${AORTA_INSTALL_LIBDIR})
  endif()
endforeach()
foreach(t aorta aorta_cuda aorta_hip aorta_mpi aorta_cairo aorta_attach aorta_attach_rocm)
  if(TARGET ${t})
    set_target_properties(${t} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  endif()
endforeach()
install(DIRECTORY config/ DESTINATION ${AORTA_INSTALL_SHARE}/config FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY examples/ DESTINATION ${AORTA_INSTALL_SHARE}/examples)
install(FILES README.md LICENSE DESTINATION ${AORTA_INSTALL_DOC})
install(DIRECTORY docs/ DESTINATION ${AORTA_INSTALL_DOC})

set(CPACK_PACKAGE_NAME aorta)
set(CPACK_PACKAGE_VENDOR aorta)
set(CPACK_PACKAGE_CONTACT "aorta maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "how much of a distributed training step's communication is hidden behind compute")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_SOURCE_GENERATOR "")
set(CPACK_STRIP_FILES OFF)
# The runtime every command needs; the plugins' libraries are what their
# commands need (CUDA is no Debian package, so it is not named).
set(AORTA_DEB_DEPENDS "libyaml-0-2, libyajl2, zlib1g, libsqlite3-0, libopenblas0 | libblas3")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${AORTA_DEB_DEPENDS}")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libcairo2, openmpi-bin, libopenmpi3")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
include(CPack)
