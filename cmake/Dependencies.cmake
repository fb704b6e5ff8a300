# Finds the distribution's packages (scripts/install-deps.sh installs them) and collects the
# targets the ipuml targets link against.
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(xtl REQUIRED)  # xsimd's config names the xtl target
find_package(xsimd REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
set(IPUML_DEPENDENCY_TARGETS TBB::tbb xsimd nlohmann_json::nlohmann_json ZLIB::ZLIB Threads::Threads)
set(IPUML_DEPENDENCY_DEFINITIONS "")
if(IPUML_WITH_HDF5)
  find_package(HDF5 REQUIRED COMPONENTS C)
  if(NOT TARGET ipuml_hdf5)
    add_library(ipuml_hdf5 INTERFACE)
    target_include_directories(ipuml_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
    target_link_libraries(ipuml_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
    target_compile_definitions(ipuml_hdf5 INTERFACE ${HDF5_DEFINITIONS})
  endif()
  # For the installed package: the include dirs and the one shared library consumers need, so
  # their projects need not enable C for FindHDF5.
  set(IPUML_HDF5_INCLUDE_DIRS ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  list(GET HDF5_C_LIBRARIES 0 IPUML_HDF5_LIBRARY)
  list(APPEND IPUML_DEPENDENCY_TARGETS $<BUILD_INTERFACE:ipuml_hdf5> $<INSTALL_INTERFACE:ipuml::hdf5>)
  list(APPEND IPUML_DEPENDENCY_DEFINITIONS IPUML_WITH_HDF5=1)
else()
  # Said explicitly: without it, header-only use looks for HDF5's headers itself.
  list(APPEND IPUML_DEPENDENCY_DEFINITIONS IPUML_WITH_HDF5=0)
endif()

# MPI (OpenMPI from Debian) for data parallelism across processes (ipuml::dist). Optional: without
# it every program runs as one instance.
option(IPUML_WITH_MPI "Data parallelism across processes with MPI, when MPI is found" ON)
set(IPUML_MPI_FOUND OFF)
if(IPUML_WITH_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(IPUML_MPI_FOUND ON)
    find_program(IPUML_MPIRUN NAMES mpirun mpiexec)
    message(STATUS "ipuml: MPI found (${MPI_C_LIBRARIES}); mpirun: ${IPUML_MPIRUN}")
  else()
    message(STATUS "ipuml: MPI not found; multi-instance runs disabled (apt install libopenmpi-dev)")
  endif()
endif()
