# install(EXPORT) of ipuml::ipuml and ipuml::header_only, with a package config that finds only
# the dependencies the installed targets need.
include(CMakePackageConfigHelpers)

# include/ipuml/{backends,models,datasets} are links in the source tree: skip them here and
# install the real headers in their place.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ipuml DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN "backends" EXCLUDE PATTERN "models" EXCLUDE PATTERN "datasets" EXCLUDE)
foreach(part backends models datasets)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ipuml/${part}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()

install(TARGETS ipuml ipuml_header_only EXPORT ipumlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_target_properties(ipuml_header_only PROPERTIES EXPORT_NAME header_only)
install(EXPORT ipumlTargets NAMESPACE ipuml:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ipuml)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ipumlConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ipumlConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ipuml)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ipumlConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ipumlConfig.cmake ${PROJECT_BINARY_DIR}/ipumlConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ipuml)

# pkg-config files for builds without CMake: ipuml (the compiled library) and
# ipuml-header-only. Dependencies with a .pc file in Debian are required by name; HDF5 and MPI
# as found when ipuml was built, as ipumlConfig.cmake does.
file(RELATIVE_PATH IPUML_PC_PREFIX_FROM_PCDIR "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" IPUML_PC_PREFIX_FROM_PCDIR "${IPUML_PC_PREFIX_FROM_PCDIR}")
set(IPUML_PC_REQUIRES "tbb zlib xsimd nlohmann_json")
set(IPUML_PC_CFLAGS "")
set(IPUML_PC_LIBS "")
if(IPUML_WITH_HDF5)
  string(APPEND IPUML_PC_CFLAGS "-DIPUML_WITH_HDF5=1")
  list(REMOVE_DUPLICATES IPUML_HDF5_INCLUDE_DIRS)
  foreach(dir ${IPUML_HDF5_INCLUDE_DIRS})
    string(APPEND IPUML_PC_CFLAGS " -I${dir}")
  endforeach()
  string(APPEND IPUML_PC_LIBS "${IPUML_HDF5_LIBRARY}")
else()
  string(APPEND IPUML_PC_CFLAGS "-DIPUML_WITH_HDF5=0")
endif()
set(IPUML_PC_HEADER_ONLY_LIBS "${IPUML_PC_LIBS} -lpthread")
if(IPUML_MPI_FOUND)
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND IPUML_PC_LIBS " ${lib}")
  endforeach()
endif()
string(APPEND IPUML_PC_LIBS " -lpthread")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ipuml.pc.in ${PROJECT_BINARY_DIR}/ipuml.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ipuml-header-only.pc.in
               ${PROJECT_BINARY_DIR}/ipuml-header-only.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ipuml.pc ${PROJECT_BINARY_DIR}/ipuml-header-only.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
