# gs_detect_gpu_archs(<var>): the CUDA architectures of the GPUs of this machine ("90-real" for a
# compute capability 9.0), from nvidia-smi; <var> is left empty when there is no GPU or no
# nvidia-smi. The build then compiles for this machine's GPU only (a few minutes) instead of the
# portable list (GEMMSCOPE_ALL_ARCHS=ON, or CMAKE_CUDA_ARCHITECTURES / CUDA_ARCHS given).
function(gs_detect_gpu_archs out)
  set(archs "")
  find_program(GS_NVIDIA_SMI nvidia-smi)
  if(GS_NVIDIA_SMI)
    execute_process(COMMAND ${GS_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 20)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" cc "${cap}")
        list(APPEND archs "${cc}-real")
      endforeach()
      list(REMOVE_DUPLICATES archs)
    endif()
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()
