# install(EXPORT) of ipuml::ipuml and ipuml::header_only, with a package config that finds only
# the dependencies the installed targets need.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ipuml DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
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
