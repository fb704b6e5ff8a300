# ipuml_cerebras_params: the reader of Cerebras-modelzoo params yaml files (params.hpp, plain C++
# types; yaml-cpp stays inside params.cpp). Included by examples/cerebras and by the tests (unit
# and fuzz), which link it also when the examples are not built (the sanitizer tree).
if(NOT TARGET ipuml_cerebras_params)
  find_package(yaml-cpp REQUIRED)
  add_library(ipuml_cerebras_params STATIC ${CMAKE_CURRENT_LIST_DIR}/params.cpp)
  # No include directory is exported: users include "params.hpp" by its path, so linking the
  # library adds no compile flag (the tests' precompiled header stays valid).
  target_link_libraries(ipuml_cerebras_params PUBLIC ipuml::ipuml PRIVATE yaml-cpp ipuml_warnings)
endif()
