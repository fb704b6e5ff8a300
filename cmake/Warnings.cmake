# Warning flags for ipuml's own targets; never exported to users.
add_library(ipuml_warnings INTERFACE)
target_compile_options(ipuml_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  # Clang's -Wall reports a module's forward(Tensor) (LibTorch style, by value, or with other
  # arguments) as hiding nn::Module's virtual forward(const Tensor&) that Sequential calls; the
  # tests write modules as LibTorch users do.
  target_compile_options(ipuml_warnings INTERFACE -Wno-overloaded-virtual)
endif()
if(IPUML_WARNINGS_AS_ERRORS)
  target_compile_options(ipuml_warnings INTERFACE -Werror)
endif()
if(IPUML_SANITIZE)
  # GCC 12's instrumentation makes -Wmaybe-uninitialized fire inside libstdc++ (std::regex's
  # std::function members), a known false positive; it stays on in the normal build.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(ipuml_warnings INTERFACE -Wno-maybe-uninitialized)
  endif()
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
