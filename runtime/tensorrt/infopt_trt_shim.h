/*
 * infopt TensorRT shim: a C ABI over TensorRT's C++ API.
 *
 * infopt (Rust) loads this library with dlopen; the library in turn dlopens
 * libnvinfer / libnvonnxparser / libcudart at run time, so neither infopt nor
 * this shim links against TensorRT or CUDA. The Rust mirror of every type here
 * is runtime/src/tensorrt/ffi.rs: change both together and bump
 * INFOPT_TRT_ABI_VERSION.
 *
 * Conventions:
 *  - Functions returning int32_t return INFOPT_TRT_OK (0) on success and an
 *    INFOPT_TRT_ERR_* code on failure; on failure *error receives a one-line (or few-line) message allocated by
 *    the shim, to be released with infopt_trt_free.
 *  - Every buffer the shim hands out is released with infopt_trt_free (or
 *    infopt_trt_free_build_result for a whole result).
 *  - Booleans are int32_t 0/1.
 */
#ifndef INFOPT_TRT_SHIM_H
#define INFOPT_TRT_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct or a signature below changes. */
#define INFOPT_TRT_ABI_VERSION 2

/* Status codes of the int32_t-returning functions. */
#define INFOPT_TRT_OK 0
#define INFOPT_TRT_ERR_FAILED 1  /* TensorRT or CUDA failed; *error says why */
#define INFOPT_TRT_ERR_MISSING 2 /* a library (TensorRT, its parser, libcudart) cannot be loaded */
#define INFOPT_TRT_ERR_VERSION 3 /* the TensorRT library's version is not the one the shim was compiled for */

/* Flavours (infopt_trt_compiled_flavor). TensorRT-RTX numbers its releases 1.x and its
   virtual interfaces change between minors, so an RTX shim checks major and minor. */
#define INFOPT_TRT_FLAVOR_TENSORRT 0
#define INFOPT_TRT_FLAVOR_RTX 1

/* Same limit as nvinfer1::Dims::MAX_DIMS. */
#define INFOPT_TRT_MAX_DIMS 8

/* Precision of a per-layer override (TensorRT 10 only). */
enum {
    INFOPT_TRT_FP32 = 0,
    INFOPT_TRT_FP16 = 1,
    INFOPT_TRT_BF16 = 2,
    INFOPT_TRT_INT8 = 3
};

typedef struct InfoptTrtLib InfoptTrtLib;

/* min/opt/max dims of one network input, all entries go into one optimization profile. */
typedef struct InfoptTrtProfileEntry {
    const char* input;
    int32_t nb_dims;
    int64_t min[INFOPT_TRT_MAX_DIMS];
    int64_t opt[INFOPT_TRT_MAX_DIMS];
    int64_t max[INFOPT_TRT_MAX_DIMS];
} InfoptTrtProfileEntry;

/* A concrete input shape for timing. */
typedef struct InfoptTrtShape {
    const char* input;
    int32_t nb_dims;
    int64_t dims[INFOPT_TRT_MAX_DIMS];
} InfoptTrtShape;

/* One per-layer precision override (TensorRT 10 only). */
typedef struct InfoptTrtLayerPrecision {
    const char* layer;
    int32_t precision; /* INFOPT_TRT_FP32 ... */
} InfoptTrtLayerPrecision;

typedef struct InfoptTrtBuildConfig {
    /* MemoryPoolType::kWORKSPACE limit; 0 keeps TensorRT's default (device memory). */
    uint64_t workspace_bytes;
    /* setBuilderOptimizationLevel (0..5); negative keeps the default (3). */
    int32_t opt_level;
    const InfoptTrtProfileEntry* profile;
    uint64_t nb_profile;
    /* Serialized timing cache to start from; NULL/0 starts an empty cache. */
    const uint8_t* timing_cache;
    uint64_t timing_cache_size;
    /* BuilderFlag::kERROR_ON_TIMING_CACHE_MISS. */
    int32_t error_on_timing_cache_miss;
    /* TensorRT 10: NetworkDefinitionCreationFlag::kSTRONGLY_TYPED (precision from the
       graph; the flags below must then be off). TensorRT 11 is always strongly typed. */
    int32_t strongly_typed;
    /* TensorRT 10 only: BuilderFlag::kFP16 / kBF16 / kINT8. */
    int32_t fp16;
    int32_t bf16;
    int32_t int8;
    /* TensorRT 10 only: ILayer::setPrecision + setOutputType on every output. */
    const InfoptTrtLayerPrecision* layer_precisions;
    uint64_t nb_layer_precisions;
    /* TensorRT 10 only: 1 = kOBEY_PRECISION_CONSTRAINTS, 0 = kPREFER_PRECISION_CONSTRAINTS
       (only set when there are layer overrides). */
    int32_t obey_precision_constraints;
    /* Path of the .onnx file, so the parser finds external data next to it; may be NULL. */
    const char* model_path;
    /* 1: deserialize the engine and read its layers with the engine inspector (needs a GPU).
       0: never deserialize (no GPU); the layers come from the builder's detailed log. */
    int32_t inspect_engine;
    /* TensorRT-RTX only: target compute capabilities as SM numbers (86 = SM 8.6);
       none keeps TensorRT-RTX's default. Another flavour refuses a non-empty list. */
    const int32_t* compute_capabilities;
    uint64_t nb_compute_capabilities;
} InfoptTrtBuildConfig;

typedef struct InfoptTrtBuildResult {
    uint8_t* engine;
    uint64_t engine_size;
    uint8_t* timing_cache;
    uint64_t timing_cache_size;
    /* IEngineInspector::getEngineInformation(kJSON) of the built engine (ProfilingVerbosity::kDETAILED). */
    char* layer_json;
    /* TensorRT's warnings during the build, one per line; may be NULL. */
    char* warnings;
    /* What the builder logged about the engine (ProfilingVerbosity::kDETAILED): its
       verbose message that begins "Layers:" (one line per kernel), then the info lines
       "Total ... Memory: N bytes" / "Max Scratch Memory: N bytes". May be NULL. Also
       filled when a build fails, as far as the builder got. */
    char* build_log;
} InfoptTrtBuildResult;

/* Version of this C ABI (INFOPT_TRT_ABI_VERSION the shim was compiled with). */
int32_t infopt_trt_abi_version(void);

/* NV_TENSORRT_MAJOR of the headers the shim was compiled against (1 for TensorRT-RTX 1.x). */
int32_t infopt_trt_compiled_major(void);

/* Version of those headers, encoded as getInferLibVersion: (major * 100 + minor) * 100 + patch. */
int32_t infopt_trt_compiled_version(void);

/* INFOPT_TRT_FLAVOR_TENSORRT or INFOPT_TRT_FLAVOR_RTX. */
int32_t infopt_trt_compiled_flavor(void);

/* dlopen TensorRT (and, if given or found, libcudart), check getInferLibVersion against
   the compiled major (and minor, for TensorRT-RTX). cudart_path may be NULL: the shim then tries the usual sonames, and
   only timing needs it. On success *out is a handle for the calls below. */
int32_t infopt_trt_open(const char* nvinfer_path, const char* onnxparser_path, const char* cudart_path,
    InfoptTrtLib** out, char** error);

/* getInferLibVersion() of the opened library: (major * 100 + minor) * 100 + patch. */
int32_t infopt_trt_library_version(const InfoptTrtLib* lib);

/* Parse ONNX bytes, configure the builder, build and serialize, and (inspect_engine) inspect
   the engine. On failure `out` may still hold a build_log (release it with
   infopt_trt_free_build_result). */
int32_t infopt_trt_build(InfoptTrtLib* lib, const uint8_t* onnx, uint64_t onnx_size, const InfoptTrtBuildConfig* config,
    InfoptTrtBuildResult* out, char** error);

/* Deserialize an engine, allocate device buffers (inputs zero-filled), run `warmup`
   enqueueV3 calls, then `runs` calls each timed with CUDA events; times_ms receives
   `runs` values. Inputs without a shape here use optimization profile 0's opt shape. */
int32_t infopt_trt_time(InfoptTrtLib* lib, const uint8_t* engine, uint64_t engine_size, const InfoptTrtShape* shapes,
    uint64_t nb_shapes, int32_t warmup, int32_t runs, float* times_ms, char** error);

void infopt_trt_free(void* ptr);
void infopt_trt_free_build_result(InfoptTrtBuildResult* result);
void infopt_trt_close(InfoptTrtLib* lib);

#ifdef __cplusplus
}
#endif

#endif /* INFOPT_TRT_SHIM_H */
