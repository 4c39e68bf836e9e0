# Finds NVIDIA's header-only cudnn-frontend for the cuDNN attention path of gemmscope_cuda.
#   GEMMSCOPE_CUDNN_FRONTEND_DIR (cache variable or environment): the folder holding
#   include/cudnn_frontend.h. Unset: ../shared/third_party/cudnn-frontend-1.23.0 (the offline copy
#   beside the checkout), any other ../shared/third_party/cudnn-frontend-*, then
#   $HOME/.cache/gemmscope-deps/cudnn-frontend-v1.23.0 (where scripts/setup.sh fetches the pinned tag).
# Also needs cuDNN's own headers (cudnn.h) at build time, never its libraries.
# Defines GEMMSCOPE_HAVE_CUDNN_ATTENTION=0/1 on gemmscope_cuda (PUBLIC) and the cache entry
# GEMMSCOPE_CUDNN_ATTENTION (INTERNAL, ON/OFF) that CI checks. GEMMSCOPE_REQUIRE_CUDNN_ATTENTION=ON
# (cache variable or environment) makes a build without it a configure error.
set(GEMMSCOPE_CUDNN_FRONTEND_DIR "$ENV{GEMMSCOPE_CUDNN_FRONTEND_DIR}" CACHE PATH
    "cudnn-frontend folder holding include/cudnn_frontend.h (empty: look in the default places)")
set(GS_CUDNN_FE_DIR "")
if(GEMMSCOPE_CUDNN_FRONTEND_DIR)
  if(NOT EXISTS "${GEMMSCOPE_CUDNN_FRONTEND_DIR}/include/cudnn_frontend.h")
    message(FATAL_ERROR "GEMMSCOPE_CUDNN_FRONTEND_DIR=${GEMMSCOPE_CUDNN_FRONTEND_DIR} has no include/cudnn_frontend.h")
  endif()
  set(GS_CUDNN_FE_DIR "${GEMMSCOPE_CUDNN_FRONTEND_DIR}")
else()
  file(GLOB GS_CUDNN_FE_SHARED LIST_DIRECTORIES true "${CMAKE_SOURCE_DIR}/../shared/third_party/cudnn-frontend-*")
  foreach(dir "${CMAKE_SOURCE_DIR}/../shared/third_party/cudnn-frontend-1.23.0" ${GS_CUDNN_FE_SHARED}
              "$ENV{HOME}/.cache/gemmscope-deps/cudnn-frontend-v1.23.0")
    if(NOT GS_CUDNN_FE_DIR AND EXISTS "${dir}/include/cudnn_frontend.h")
      get_filename_component(GS_CUDNN_FE_DIR "${dir}" ABSOLUTE)
    endif()
  endforeach()
endif()
find_path(GS_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
set(GEMMSCOPE_REQUIRE_CUDNN_ATTENTION "$ENV{GEMMSCOPE_REQUIRE_CUDNN_ATTENTION}" CACHE STRING
    "ON: a build without cuDNN attention (no cudnn-frontend or no cudnn.h) is a configure error")
if(GS_CUDNN_FE_DIR AND GS_CUDNN_INCLUDE_DIR)
  set(GEMMSCOPE_CUDNN_ATTENTION ON CACHE INTERNAL "cuDNN attention built")
  target_include_directories(gemmscope_cuda SYSTEM PRIVATE "${GS_CUDNN_FE_DIR}/include" "${GS_CUDNN_INCLUDE_DIR}")
  # The frontend resolves every cuDNN call through dlsym; its JSON serialization is not used.
  target_compile_definitions(gemmscope_cuda PRIVATE NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING CUDNN_FRONTEND_SKIP_JSON_LIB)
  target_compile_definitions(gemmscope_cuda PUBLIC GEMMSCOPE_HAVE_CUDNN_ATTENTION=1)
  message(STATUS "gemmscope: cuDNN attention on: cudnn-frontend in ${GS_CUDNN_FE_DIR}, cuDNN headers in "
                 "${GS_CUDNN_INCLUDE_DIR} (libcudnn.so.9 loaded at run time)")
else()
  set(GEMMSCOPE_CUDNN_ATTENTION OFF CACHE INTERNAL "cuDNN attention built")
  target_compile_definitions(gemmscope_cuda PUBLIC GEMMSCOPE_HAVE_CUDNN_ATTENTION=0)
  if(NOT GS_CUDNN_FE_DIR)
    set(GS_CUDNN_WHY "no cudnn-frontend found (set GEMMSCOPE_CUDNN_FRONTEND_DIR to the folder holding "
                     "include/cudnn_frontend.h)")
  else()
    set(GS_CUDNN_WHY "cudnn-frontend found in ${GS_CUDNN_FE_DIR} but no cuDNN headers (cudnn.h)")
  endif()
  string(JOIN "" GS_CUDNN_WHY ${GS_CUDNN_WHY})
  if(GEMMSCOPE_REQUIRE_CUDNN_ATTENTION)
    message(FATAL_ERROR "gemmscope: GEMMSCOPE_REQUIRE_CUDNN_ATTENTION=${GEMMSCOPE_REQUIRE_CUDNN_ATTENTION} but this build "
                        "would have no cuDNN attention: ${GS_CUDNN_WHY}")
  endif()
  message(STATUS "gemmscope: building without cuDNN attention: ${GS_CUDNN_WHY}")
endif()
