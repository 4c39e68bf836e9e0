# Finds NVIDIA's header-only cudnn-frontend for the cuDNN attention path of gemmscope_cuda.
#   GEMMSCOPE_CUDNN_FRONTEND_DIR (cache variable or environment): the folder holding
#   include/cudnn_frontend.h. Unset: $HOME/.cache/gemmscope-deps/cudnn-frontend-v1.23.0 (where
#   scripts/setup.sh clones the pinned tag), then ../shared/third_party/cudnn-frontend-*.
# Also needs cuDNN's own headers (cudnn.h) at build time, never its libraries.
# Defines GEMMSCOPE_HAVE_CUDNN_ATTENTION=0/1 on gemmscope_cuda (PUBLIC).
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
  foreach(dir "$ENV{HOME}/.cache/gemmscope-deps/cudnn-frontend-v1.23.0" ${GS_CUDNN_FE_SHARED})
    if(NOT GS_CUDNN_FE_DIR AND EXISTS "${dir}/include/cudnn_frontend.h")
      get_filename_component(GS_CUDNN_FE_DIR "${dir}" ABSOLUTE)
    endif()
  endforeach()
endif()
find_path(GS_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
if(GS_CUDNN_FE_DIR AND GS_CUDNN_INCLUDE_DIR)
  target_include_directories(gemmscope_cuda SYSTEM PRIVATE "${GS_CUDNN_FE_DIR}/include" "${GS_CUDNN_INCLUDE_DIR}")
  # The frontend resolves every cuDNN call through dlsym; its JSON serialization is not used.
  target_compile_definitions(gemmscope_cuda PRIVATE NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING CUDNN_FRONTEND_SKIP_JSON_LIB)
  target_compile_definitions(gemmscope_cuda PUBLIC GEMMSCOPE_HAVE_CUDNN_ATTENTION=1)
  message(STATUS "gemmscope: cuDNN attention on: cudnn-frontend in ${GS_CUDNN_FE_DIR}, cuDNN headers in "
                 "${GS_CUDNN_INCLUDE_DIR} (libcudnn.so.9 loaded at run time)")
else()
  target_compile_definitions(gemmscope_cuda PUBLIC GEMMSCOPE_HAVE_CUDNN_ATTENTION=0)
  if(NOT GS_CUDNN_FE_DIR)
    message(STATUS "gemmscope: building without cuDNN attention: no cudnn-frontend found "
                   "(set GEMMSCOPE_CUDNN_FRONTEND_DIR to the folder holding include/cudnn_frontend.h)")
  else()
    message(STATUS "gemmscope: building without cuDNN attention: cudnn-frontend found but no cuDNN headers (cudnn.h)")
  endif()
endif()
