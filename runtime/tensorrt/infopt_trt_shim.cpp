// infopt TensorRT shim: the C ABI declared in infopt_trt_shim.h, implemented against
// TensorRT's C++ headers (NvInfer.h, NvOnnxParser.h).
//
// Why this links against nothing but libdl: TensorRT's public classes (IBuilder,
// IBuilderConfig, ICudaEngine, ...) are inline wrappers whose methods forward to a
// virtual implementation object, so calling them needs no symbol from libnvinfer. The
// only exported functions needed are the factories, which we look up with dlsym:
// createInferBuilder_INTERNAL, createInferRuntime_INTERNAL, createNvOnnxParser_INTERNAL
// and getInferLibVersion. The few CUDA runtime calls used for timing are looked up the
// same way in libcudart. scripts/check-trt-shim.sh checks that the compiled object has
// no undefined TensorRT symbol.
//
// Flavours (see runtime/src/tensorrt/flavor_table.rs): TensorRT 10, TensorRT 11 and
// TensorRT-RTX 1.x. Their differences are under INFOPT_TRT_STRONGLY_TYPED_ONLY and
// INFOPT_TRT_RTX below: TensorRT 11 and TensorRT-RTX build strongly typed networks only
// (precision comes from the graph) and have no BuilderFlag::kFP16/kINT8/kBF16, no
// precision-constraint flags and no ILayer::setPrecision/setOutputType. TensorRT-RTX
// reuses NV_TENSORRT_MAJOR for its own numbering (1.x), so it is told apart by
// TRT_MAJOR_RTX; it has compute-capability targets, and its timing cache is a no-op
// (deprecated, an error under -Werror). The shim refuses a library whose version
// differs from its headers (major; major and minor for TensorRT-RTX, whose virtual
// interfaces grow between minors).

#include "infopt_trt_shim.h"

#include <NvInfer.h>
#include <NvOnnxParser.h>

#ifdef TRT_MAJOR_RTX
#define INFOPT_TRT_RTX 1
#else
#define INFOPT_TRT_RTX 0
#endif
#if INFOPT_TRT_RTX || NV_TENSORRT_MAJOR >= 11
#define INFOPT_TRT_STRONGLY_TYPED_ONLY 1
#else
#define INFOPT_TRT_STRONGLY_TYPED_ONLY 0
#endif

#include <dirent.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace
{

// --- CUDA runtime, by its documented C signatures -------------------------------------
// cudaError_t is an enum (int-sized, 0 == cudaSuccess); cudaStream_t and cudaEvent_t come
// from cuda_runtime_api.h, which NvInferRuntimeBase.h includes.
using CudaError = int;
struct CudaApi
{
    CudaError (*malloc)(void** ptr, size_t size) = nullptr;
    CudaError (*free)(void* ptr) = nullptr;
    CudaError (*memset)(void* ptr, int value, size_t count) = nullptr;
    CudaError (*streamCreate)(cudaStream_t* stream) = nullptr;
    CudaError (*streamDestroy)(cudaStream_t stream) = nullptr;
    CudaError (*streamSynchronize)(cudaStream_t stream) = nullptr;
    CudaError (*eventCreate)(cudaEvent_t* event) = nullptr;
    CudaError (*eventDestroy)(cudaEvent_t event) = nullptr;
    CudaError (*eventRecord)(cudaEvent_t event, cudaStream_t stream) = nullptr;
    CudaError (*eventSynchronize)(cudaEvent_t event) = nullptr;
    CudaError (*eventElapsedTime)(float* ms, cudaEvent_t start, cudaEvent_t end) = nullptr;
    char const* (*getErrorString)(CudaError error) = nullptr;
};

// --- TensorRT factories ----------------------------------------------------------------
using CreateBuilderFn = void* (*) (void* logger, int32_t version);
using CreateRuntimeFn = void* (*) (void* logger, int32_t version);
using CreateParserFn = void* (*) (void* network, void* logger, int version);
using LibVersionFn = int32_t (*)();

// Collects TensorRT's messages. TensorRT may log from several threads, hence the mutex.
class CollectingLogger : public nvinfer1::ILogger
{
public:
    void log(Severity severity, char const* msg) noexcept override
    {
        if (msg == nullptr)
        {
            return;
        }
        std::lock_guard<std::mutex> lock(mMutex);
        try
        {
            if (severity == Severity::kINTERNAL_ERROR || severity == Severity::kERROR)
            {
                mErrors.emplace_back(msg);
            }
            else if (severity == Severity::kWARNING)
            {
                mWarnings.emplace_back(msg);
            }
            else if (isBuildFact(msg))
            {
                mBuildLog.emplace_back(msg);
            }
        }
        catch (...)
        {
            // Out of memory while logging: drop the message rather than throw through TensorRT.
        }
    }

    void clear()
    {
        std::lock_guard<std::mutex> lock(mMutex);
        mErrors.clear();
        mWarnings.clear();
        mBuildLog.clear();
    }

    std::string buildLog()
    {
        std::lock_guard<std::mutex> lock(mMutex);
        return join(mBuildLog);
    }

    std::string errors()
    {
        std::lock_guard<std::mutex> lock(mMutex);
        return join(mErrors);
    }

    std::string warnings()
    {
        std::lock_guard<std::mutex> lock(mMutex);
        return join(mWarnings);
    }

private:
    // The few info/verbose messages a CPU-only build reports its engine with: the
    // per-kernel table (ProfilingVerbosity::kDETAILED) and the memory totals. Everything
    // else at those severities is dropped, so a verbose build keeps little in memory.
    static bool isBuildFact(char const* msg)
    {
        return std::strncmp(msg, "Layers:", 7) == 0 || std::strncmp(msg, "Total ", 6) == 0
            || std::strncmp(msg, "Max Scratch Memory:", 19) == 0;
    }

    static std::string join(std::vector<std::string> const& lines)
    {
        std::string out;
        for (auto const& line : lines)
        {
            if (!out.empty())
            {
                out += '\n';
            }
            out += line;
        }
        return out;
    }

    std::mutex mMutex;
    std::vector<std::string> mErrors;
    std::vector<std::string> mWarnings;
    std::vector<std::string> mBuildLog;
};

// Owns a TensorRT object (all of them are released with delete since TensorRT 10).
template <typename T>
using Owned = std::unique_ptr<T>;

char* dupString(std::string const& text)
{
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out != nullptr)
    {
        std::memcpy(out, text.c_str(), text.size() + 1);
    }
    return out;
}

uint8_t* dupBytes(void const* data, size_t size)
{
    uint8_t* out = static_cast<uint8_t*>(std::malloc(size == 0 ? 1 : size));
    if (out != nullptr && size > 0)
    {
        std::memcpy(out, data, size);
    }
    return out;
}

// Sets *error and returns the failure status. `detail` is TensorRT's own log, appended
// after the message so the caller sees the cause.
int32_t fail(char** error, std::string message, std::string const& detail = std::string(),
    int32_t status = INFOPT_TRT_ERR_FAILED)
{
    if (!detail.empty())
    {
        message += ": ";
        message += detail;
    }
    if (error != nullptr)
    {
        *error = dupString(message);
    }
    return status;
}

// A library that cannot be loaded: the caller reports TensorRT (or CUDA) as unavailable.
int32_t missing(char** error, std::string message)
{
    return fail(error, std::move(message), std::string(), INFOPT_TRT_ERR_MISSING);
}

std::string dimsToString(nvinfer1::Dims const& dims)
{
    std::ostringstream out;
    out << '[';
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out << (i ? "," : "") << dims.d[i];
    }
    out << ']';
    return out.str();
}

nvinfer1::Dims toDims(int32_t nbDims, int64_t const* values)
{
    nvinfer1::Dims dims{};
    dims.nbDims = nbDims;
    for (int32_t i = 0; i < nbDims; ++i)
    {
        dims.d[i] = values[i];
    }
    return dims;
}

bool isDynamic(nvinfer1::Dims const& dims)
{
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        if (dims.d[i] < 0)
        {
            return true;
        }
    }
    return false;
}

// Bytes of `count` elements of `type`; 0 for types the shim does not allocate.
uint64_t byteSize(nvinfer1::DataType type, uint64_t count)
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT:
    case nvinfer1::DataType::kINT32: return count * 4;
    case nvinfer1::DataType::kINT64: return count * 8;
    case nvinfer1::DataType::kHALF:
    case nvinfer1::DataType::kBF16: return count * 2;
    case nvinfer1::DataType::kINT8:
    case nvinfer1::DataType::kUINT8:
    case nvinfer1::DataType::kBOOL:
    case nvinfer1::DataType::kFP8: return count;
    case nvinfer1::DataType::kINT4: return (count + 1) / 2;
    default: return 0;
    }
}

} // namespace

struct InfoptTrtLib
{
    void* nvinfer = nullptr;
    void* onnxparser = nullptr;
    void* cudart = nullptr;
    CreateBuilderFn createBuilder = nullptr;
    CreateRuntimeFn createRuntime = nullptr;
    CreateParserFn createParser = nullptr;
    int32_t version = 0;
    CudaApi cuda;
    bool cudaLoaded = false;
    // Folder of libnvinfer, and whether its builder resources have been preloaded.
    std::string nvinferDir;
    bool builderResourcesLoaded = false;
    // One logger for the library's lifetime: TensorRT keeps the first logger it is given.
    CollectingLogger logger;
    // One call at a time per handle, since the logger's messages belong to the running call.
    std::mutex callMutex;
};

namespace
{

std::string dlerrorText()
{
    char const* text = dlerror();
    return text != nullptr ? std::string(text) : std::string("unknown dlopen error");
}

template <typename Fn>
bool lookup(void* handle, char const* name, Fn& out)
{
    out = reinterpret_cast<Fn>(dlsym(handle, name));
    return out != nullptr;
}

bool loadCuda(InfoptTrtLib& lib, char const* cudartPath, std::string& error)
{
    if (lib.cudaLoaded)
    {
        return true;
    }
    if (cudartPath != nullptr && cudartPath[0] != '\0')
    {
        lib.cudart = dlopen(cudartPath, RTLD_NOW | RTLD_LOCAL);
        if (lib.cudart == nullptr)
        {
            error = "cannot load the CUDA runtime " + std::string(cudartPath) + ": " + dlerrorText();
            return false;
        }
    }
    else
    {
        for (char const* soname : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"})
        {
            lib.cudart = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
            if (lib.cudart != nullptr)
            {
                break;
            }
        }
        if (lib.cudart == nullptr)
        {
            error = "cannot find the CUDA runtime (libcudart.so.13/.12/.11.0) on the library path; "
                    "install it (pip install nvidia-cuda-runtime-cu12) or add its folder to LD_LIBRARY_PATH";
            return false;
        }
    }
    CudaApi& c = lib.cuda;
    bool ok = lookup(lib.cudart, "cudaMalloc", c.malloc) && lookup(lib.cudart, "cudaFree", c.free)
        && lookup(lib.cudart, "cudaMemset", c.memset) && lookup(lib.cudart, "cudaStreamCreate", c.streamCreate)
        && lookup(lib.cudart, "cudaStreamDestroy", c.streamDestroy)
        && lookup(lib.cudart, "cudaStreamSynchronize", c.streamSynchronize)
        && lookup(lib.cudart, "cudaEventCreate", c.eventCreate)
        && lookup(lib.cudart, "cudaEventDestroy", c.eventDestroy)
        && lookup(lib.cudart, "cudaEventRecord", c.eventRecord)
        && lookup(lib.cudart, "cudaEventSynchronize", c.eventSynchronize)
        && lookup(lib.cudart, "cudaEventElapsedTime", c.eventElapsedTime)
        && lookup(lib.cudart, "cudaGetErrorString", c.getErrorString);
    if (!ok)
    {
        error = "the CUDA runtime library lacks a required function: " + dlerrorText();
        return false;
    }
    lib.cudaLoaded = true;
    return true;
}

// The builder dlopens its kernel library (libnvinfer_builder_resource.so.X.Y.Z, or
// libnvinfer_builder_resource_smNN.so.* on Jetson) by file name, which only resolves when
// TensorRT's folder is on the loader's path (a pip install's tensorrt_libs or a tarball
// usually is not). Loading the ones beside libnvinfer first, globally, makes the builder's
// later dlopen find them already loaded. Failures are left for the builder to report.
void preloadBuilderResources(InfoptTrtLib& lib)
{
    if (lib.builderResourcesLoaded || lib.nvinferDir.empty())
    {
        return;
    }
    lib.builderResourcesLoaded = true;
    DIR* dir = opendir(lib.nvinferDir.c_str());
    if (dir == nullptr)
    {
        return;
    }
    std::vector<std::string> found;
    while (dirent* entry = readdir(dir))
    {
        std::string name = entry->d_name;
        // The _win resource builds Windows engines from Linux: never needed here, and large.
        if (name.rfind("libnvinfer_builder_resource", 0) == 0 && name.find(".so") != std::string::npos
            && name.find("_win") == std::string::npos)
        {
            found.push_back(lib.nvinferDir + "/" + name);
        }
    }
    closedir(dir);
    for (auto const& path : found)
    {
        dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
}

std::string cudaText(CudaApi const& cuda, CudaError status)
{
    char const* text = cuda.getErrorString != nullptr ? cuda.getErrorString(status) : nullptr;
    return text != nullptr ? std::string(text) : "CUDA error " + std::to_string(status);
}

// Layer and network inputs, named, for messages that list what exists.
std::string listNames(std::vector<std::string> const& names, size_t limit = 12)
{
    std::string out;
    for (size_t i = 0; i < names.size() && i < limit; ++i)
    {
        out += (i ? ", " : "") + names[i];
    }
    if (names.size() > limit)
    {
        out += ", ... (" + std::to_string(names.size()) + " in all)";
    }
    return out;
}

// Adds the caller's min/opt/max entries as one optimization profile, after checking that
// each names a network input and that every dynamic input has an entry.
bool addProfile(nvinfer1::IBuilder& builder, nvinfer1::INetworkDefinition& network, nvinfer1::IBuilderConfig& config,
    InfoptTrtBuildConfig const& cfg, std::string& error)
{
    std::vector<std::string> inputNames;
    std::map<std::string, nvinfer1::Dims> inputDims;
    for (int32_t i = 0; i < network.getNbInputs(); ++i)
    {
        nvinfer1::ITensor* input = network.getInput(i);
        inputNames.emplace_back(input->getName());
        inputDims[input->getName()] = input->getDimensions();
    }
    std::set<std::string> given;
    for (uint64_t i = 0; i < cfg.nb_profile; ++i)
    {
        InfoptTrtProfileEntry const& entry = cfg.profile[i];
        std::string name = entry.input != nullptr ? entry.input : "";
        auto found = inputDims.find(name);
        if (found == inputDims.end())
        {
            error = "shape for `" + name + "`, which is not a network input (inputs: " + listNames(inputNames) + ")";
            return false;
        }
        if (entry.nb_dims != found->second.nbDims)
        {
            error = "input `" + name + "` has rank " + std::to_string(found->second.nbDims) + " "
                + dimsToString(found->second) + " but its shapes have rank " + std::to_string(entry.nb_dims);
            return false;
        }
        given.insert(name);
    }
    for (auto const& [name, dims] : inputDims)
    {
        if (isDynamic(dims) && given.count(name) == 0)
        {
            error = "input `" + name + "` has dynamic dims " + dimsToString(dims)
                + "; give its min/opt/max shapes (--shapes " + name + ":MIN/OPT/MAX)";
            return false;
        }
    }
    if (cfg.nb_profile == 0)
    {
        return true;
    }
    nvinfer1::IOptimizationProfile* profile = builder.createOptimizationProfile();
    if (profile == nullptr)
    {
        error = "createOptimizationProfile failed";
        return false;
    }
    for (uint64_t i = 0; i < cfg.nb_profile; ++i)
    {
        InfoptTrtProfileEntry const& entry = cfg.profile[i];
        bool ok = profile->setDimensions(
                      entry.input, nvinfer1::OptProfileSelector::kMIN, toDims(entry.nb_dims, entry.min))
            && profile->setDimensions(
                entry.input, nvinfer1::OptProfileSelector::kOPT, toDims(entry.nb_dims, entry.opt))
            && profile->setDimensions(
                entry.input, nvinfer1::OptProfileSelector::kMAX, toDims(entry.nb_dims, entry.max));
        if (!ok)
        {
            error = "input `" + std::string(entry.input) + "`: TensorRT rejected its min/opt/max shapes "
                + dimsToString(toDims(entry.nb_dims, entry.min)) + "/" + dimsToString(toDims(entry.nb_dims, entry.opt))
                + "/" + dimsToString(toDims(entry.nb_dims, entry.max)) + " (need min <= opt <= max, and static dims kept)";
            return false;
        }
    }
    if (config.addOptimizationProfile(profile) < 0)
    {
        error = "TensorRT rejected the optimization profile";
        return false;
    }
    return true;
}

#if !INFOPT_TRT_STRONGLY_TYPED_ONLY
// Late TensorRT 10 releases deprecate weak typing (flags, setPrecision) in favour of strongly
// typed networks; the shim still offers it for TensorRT 10, on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
nvinfer1::DataType toDataType(int32_t precision)
{
    switch (precision)
    {
    case INFOPT_TRT_FP16: return nvinfer1::DataType::kHALF;
    case INFOPT_TRT_BF16: return nvinfer1::DataType::kBF16;
    case INFOPT_TRT_INT8: return nvinfer1::DataType::kINT8;
    default: return nvinfer1::DataType::kFLOAT;
    }
}

// TensorRT 10 (weakly typed): builder flags, per-layer precision and its constraint flag.
bool applyPrecision(nvinfer1::INetworkDefinition& network, nvinfer1::IBuilderConfig& config,
    InfoptTrtBuildConfig const& cfg, std::string& error)
{
    if (cfg.fp16)
    {
        config.setFlag(nvinfer1::BuilderFlag::kFP16);
    }
    if (cfg.bf16)
    {
        config.setFlag(nvinfer1::BuilderFlag::kBF16);
    }
    if (cfg.int8)
    {
        // Explicit quantization: scales come from the graph's Q/DQ nodes, no calibrator.
        config.setFlag(nvinfer1::BuilderFlag::kINT8);
    }
    if (cfg.nb_layer_precisions == 0)
    {
        return true;
    }
    std::map<std::string, nvinfer1::ILayer*> layers;
    std::vector<std::string> layerNames;
    for (int32_t i = 0; i < network.getNbLayers(); ++i)
    {
        nvinfer1::ILayer* layer = network.getLayer(i);
        layers[layer->getName()] = layer;
        layerNames.emplace_back(layer->getName());
    }
    for (uint64_t i = 0; i < cfg.nb_layer_precisions; ++i)
    {
        InfoptTrtLayerPrecision const& entry = cfg.layer_precisions[i];
        std::string name = entry.layer != nullptr ? entry.layer : "";
        auto found = layers.find(name);
        if (found == layers.end())
        {
            error = "no layer named `" + name + "` in the parsed network (layers: " + listNames(layerNames) + ")";
            return false;
        }
        nvinfer1::DataType type = toDataType(entry.precision);
        found->second->setPrecision(type);
        for (int32_t o = 0; o < found->second->getNbOutputs(); ++o)
        {
            found->second->setOutputType(o, type);
        }
    }
    config.setFlag(cfg.obey_precision_constraints ? nvinfer1::BuilderFlag::kOBEY_PRECISION_CONSTRAINTS
                                                  : nvinfer1::BuilderFlag::kPREFER_PRECISION_CONSTRAINTS);
    return true;
}
#pragma GCC diagnostic pop
#endif

// TensorRT-RTX: the GPUs the engine is compiled for when it is first loaded.
bool applyComputeCapabilities(nvinfer1::IBuilderConfig& config, InfoptTrtBuildConfig const& cfg, std::string& error)
{
    if (cfg.nb_compute_capabilities == 0)
    {
        return true;
    }
#if INFOPT_TRT_RTX
    if (!config.setNbComputeCapabilities(static_cast<int32_t>(cfg.nb_compute_capabilities)))
    {
        error = "TensorRT-RTX refused " + std::to_string(cfg.nb_compute_capabilities) + " compute capabilities";
        return false;
    }
    for (uint64_t i = 0; i < cfg.nb_compute_capabilities; ++i)
    {
        int32_t sm = cfg.compute_capabilities[i];
        if (!config.setComputeCapability(static_cast<nvinfer1::ComputeCapability>(sm), static_cast<int32_t>(i)))
        {
            error = "TensorRT-RTX " + std::to_string(NV_TENSORRT_MAJOR) + "." + std::to_string(NV_TENSORRT_MINOR)
                + " does not support compute capability " + std::to_string(sm) + " (--compute-capability)";
            return false;
        }
    }
    return true;
#else
    (void) config;
    error = "--compute-capability is a TensorRT-RTX setting; TensorRT " + std::to_string(NV_TENSORRT_MAJOR)
        + " builds for the GPU it runs on";
    return false;
#endif
}

// Sets every dynamic input of profile 0 to its opt shape (or the caller's shape).
bool setInputShapes(nvinfer1::ICudaEngine& engine, nvinfer1::IExecutionContext& context, InfoptTrtShape const* shapes,
    uint64_t nbShapes, std::string& error)
{
    std::map<std::string, nvinfer1::Dims> requested;
    for (uint64_t i = 0; i < nbShapes; ++i)
    {
        requested[shapes[i].input != nullptr ? shapes[i].input : ""] = toDims(shapes[i].nb_dims, shapes[i].dims);
    }
    std::set<std::string> used;
    for (int32_t i = 0; i < engine.getNbIOTensors(); ++i)
    {
        char const* name = engine.getIOTensorName(i);
        if (engine.getTensorIOMode(name) != nvinfer1::TensorIOMode::kINPUT)
        {
            continue;
        }
        if (engine.isShapeInferenceIO(name))
        {
            error = "input `" + std::string(name) + "` is a shape tensor, which timing does not support";
            return false;
        }
        nvinfer1::Dims dims = engine.getTensorShape(name);
        auto found = requested.find(name);
        if (found != requested.end())
        {
            dims = found->second;
            used.insert(name);
        }
        else if (isDynamic(dims))
        {
            dims = engine.getProfileShape(name, 0, nvinfer1::OptProfileSelector::kOPT);
        }
        if (!context.setInputShape(name, dims))
        {
            error = "input `" + std::string(name) + "`: shape " + dimsToString(dims)
                + " is outside the engine's optimization profile "
                + dimsToString(engine.getProfileShape(name, 0, nvinfer1::OptProfileSelector::kMIN)) + " to "
                + dimsToString(engine.getProfileShape(name, 0, nvinfer1::OptProfileSelector::kMAX));
            return false;
        }
    }
    for (auto const& [name, dims] : requested)
    {
        if (used.count(name) == 0)
        {
            error = "shape given for `" + name + "`, which is not an input of the engine";
            return false;
        }
    }
    return true;
}

std::string inspectEngine(InfoptTrtLib& lib, uint8_t const* engineData, size_t engineSize, std::string& error)
{
    Owned<nvinfer1::IRuntime> runtime(
        static_cast<nvinfer1::IRuntime*>(lib.createRuntime(&lib.logger, NV_TENSORRT_VERSION)));
    if (!runtime)
    {
        error = "createInferRuntime failed";
        return std::string();
    }
    Owned<nvinfer1::ICudaEngine> engine(runtime->deserializeCudaEngine(engineData, engineSize));
    if (!engine)
    {
        error = "cannot deserialize the engine just built";
        return std::string();
    }
    // With dynamic shapes the inspector reports formats only for a context whose input
    // shapes are set; use the profile's opt shapes. If that fails the JSON says
    // "N/A due to dynamic shapes", which the caller reports as an unknown precision.
    // (Declared before the inspector, which points at it.)
    Owned<nvinfer1::IExecutionContext> context(engine->createExecutionContext());
    Owned<nvinfer1::IEngineInspector> inspector(engine->createEngineInspector());
    if (!inspector)
    {
        error = "createEngineInspector failed";
        return std::string();
    }
    std::string ignored;
    if (context && setInputShapes(*engine, *context, nullptr, 0, ignored))
    {
        inspector->setExecutionContext(context.get());
    }
    char const* json = inspector->getEngineInformation(nvinfer1::LayerInformationFormat::kJSON);
    if (json == nullptr)
    {
        error = "getEngineInformation returned nothing";
        return std::string();
    }
    return std::string(json);
}

// Grows an output buffer when an output's size is only known after enqueue
// (data-dependent shapes such as NonZero).
class GrowingOutput : public nvinfer1::IOutputAllocator
{
public:
    explicit GrowingOutput(CudaApi const& cuda)
        : mCuda(cuda)
    {
    }

    ~GrowingOutput() override
    {
        if (mPtr != nullptr)
        {
            mCuda.free(mPtr);
        }
    }

    void* reallocateOutputAsync(
        char const* /*tensorName*/, void* /*currentMemory*/, uint64_t size, uint64_t /*alignment*/,
        cudaStream_t /*stream*/) noexcept override
    {
        if (size <= mSize && mPtr != nullptr)
        {
            return mPtr;
        }
        if (mPtr != nullptr)
        {
            mCuda.free(mPtr);
            mPtr = nullptr;
            mSize = 0;
        }
        uint64_t bytes = size == 0 ? 1 : size;
        if (mCuda.malloc(&mPtr, bytes) != 0)
        {
            mPtr = nullptr;
            return nullptr;
        }
        mSize = bytes;
        return mPtr;
    }

    void notifyShape(char const* /*tensorName*/, nvinfer1::Dims const& /*dims*/) noexcept override {}

private:
    CudaApi const& mCuda;
    void* mPtr = nullptr;
    uint64_t mSize = 0;
};

// Device resources of one timing call, released in reverse order whatever happens.
struct TimingResources
{
    explicit TimingResources(CudaApi const& cuda)
        : cuda(cuda)
    {
    }
    ~TimingResources()
    {
        if (stream != nullptr)
        {
            cuda.streamSynchronize(stream);
        }
        outputs.clear();
        for (void* ptr : buffers)
        {
            cuda.free(ptr);
        }
        if (start != nullptr)
        {
            cuda.eventDestroy(start);
        }
        if (stop != nullptr)
        {
            cuda.eventDestroy(stop);
        }
        if (stream != nullptr)
        {
            cuda.streamDestroy(stream);
        }
    }
    CudaApi const& cuda;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    std::vector<void*> buffers;
    std::vector<std::unique_ptr<GrowingOutput>> outputs;
};

} // namespace

extern "C" {

int32_t infopt_trt_abi_version(void)
{
    return INFOPT_TRT_ABI_VERSION;
}

int32_t infopt_trt_compiled_major(void)
{
    return NV_TENSORRT_MAJOR;
}

int32_t infopt_trt_compiled_version(void)
{
    return static_cast<int32_t>(NV_TENSORRT_VERSION);
}

int32_t infopt_trt_compiled_flavor(void)
{
    return INFOPT_TRT_RTX ? INFOPT_TRT_FLAVOR_RTX : INFOPT_TRT_FLAVOR_TENSORRT;
}

int32_t infopt_trt_open(char const* nvinfer_path, char const* onnxparser_path, char const* cudart_path,
    InfoptTrtLib** out, char** error)
{
    if (out == nullptr || nvinfer_path == nullptr || onnxparser_path == nullptr)
    {
        return fail(error, "infopt_trt_open: null argument");
    }
    *out = nullptr;
    std::unique_ptr<InfoptTrtLib> lib(new (std::nothrow) InfoptTrtLib());
    if (!lib)
    {
        return fail(error, "out of memory");
    }
    // TensorRT keeps process-wide state (plugin registry, loggers): once loaded it stays
    // loaded, so the handles are never dlclose'd.
    lib->nvinfer = dlopen(nvinfer_path, RTLD_NOW | RTLD_GLOBAL);
    if (lib->nvinfer == nullptr)
    {
        return missing(error, "cannot load TensorRT " + std::string(nvinfer_path) + ": " + dlerrorText());
    }
    LibVersionFn libVersion = nullptr;
    if (!lookup(lib->nvinfer, "getInferLibVersion", libVersion)
        || !lookup(lib->nvinfer, "createInferBuilder_INTERNAL", lib->createBuilder)
        || !lookup(lib->nvinfer, "createInferRuntime_INTERNAL", lib->createRuntime))
    {
        return missing(error, std::string(nvinfer_path) + " is not a TensorRT library: " + dlerrorText());
    }
    lib->version = libVersion();
    std::string nvinferPath(nvinfer_path);
    size_t slash = nvinferPath.rfind('/');
    if (slash != std::string::npos)
    {
        lib->nvinferDir = nvinferPath.substr(0, slash == 0 ? 1 : slash);
    }
    int32_t major = lib->version / 10000;
    int32_t minor = lib->version / 100 % 100;
#if INFOPT_TRT_RTX
    if (major != NV_TENSORRT_MAJOR || minor != NV_TENSORRT_MINOR)
    {
        return fail(error,
            "TensorRT-RTX " + std::to_string(major) + "." + std::to_string(minor) + " at " + nvinfer_path
                + " does not match this shim, compiled for TensorRT-RTX " + std::to_string(NV_TENSORRT_MAJOR) + "."
                + std::to_string(NV_TENSORRT_MINOR) + " (its interfaces change between minors); install "
                + "tensorrt-rtx-cu13-libs " + std::to_string(NV_TENSORRT_MAJOR) + "." + std::to_string(NV_TENSORRT_MINOR)
                + ".* or build a shim against that version's headers (runtime/tensorrt/build.sh)",
            std::string(), INFOPT_TRT_ERR_VERSION);
    }
#endif
    if (major != NV_TENSORRT_MAJOR)
    {
        return fail(error,
            "TensorRT " + std::to_string(major) + "." + std::to_string(minor) + " at "
                + nvinfer_path + " does not match this shim, compiled for TensorRT "
                + std::to_string(NV_TENSORRT_MAJOR) + "; rebuild the shim against TensorRT "
                + std::to_string(major) + "'s headers (runtime/tensorrt/build.sh) or point --trt-lib at TensorRT "
                + std::to_string(NV_TENSORRT_MAJOR),
            std::string(), INFOPT_TRT_ERR_VERSION);
    }
    // The parser's DT_NEEDED libnvinfer resolves to the copy loaded above (same soname).
    lib->onnxparser = dlopen(onnxparser_path, RTLD_NOW | RTLD_LOCAL);
    if (lib->onnxparser == nullptr)
    {
        return missing(
            error, "cannot load the TensorRT ONNX parser " + std::string(onnxparser_path) + ": " + dlerrorText());
    }
    if (!lookup(lib->onnxparser, "createNvOnnxParser_INTERNAL", lib->createParser))
    {
        return missing(error, std::string(onnxparser_path) + " is not the TensorRT ONNX parser: " + dlerrorText());
    }
    // CUDA is only needed for timing; a missing libcudart is reported there.
    if (cudart_path != nullptr && cudart_path[0] != '\0')
    {
        std::string cudaError;
        if (!loadCuda(*lib, cudart_path, cudaError))
        {
            return missing(error, cudaError);
        }
    }
    *out = lib.release();
    return 0;
}

int32_t infopt_trt_library_version(InfoptTrtLib const* lib)
{
    return lib != nullptr ? lib->version : 0;
}

int32_t infopt_trt_build(InfoptTrtLib* lib, uint8_t const* onnx, uint64_t onnx_size, InfoptTrtBuildConfig const* cfg,
    InfoptTrtBuildResult* out, char** error)
{
    if (lib == nullptr || onnx == nullptr || cfg == nullptr || out == nullptr)
    {
        return fail(error, "infopt_trt_build: null argument");
    }
    std::memset(out, 0, sizeof(*out));
    std::lock_guard<std::mutex> lock(lib->callMutex);
    lib->logger.clear();
    try
    {
#if INFOPT_TRT_STRONGLY_TYPED_ONLY
        if (cfg->fp16 || cfg->bf16 || cfg->int8 || cfg->nb_layer_precisions > 0)
        {
            return fail(error,
                std::string(INFOPT_TRT_RTX ? "TensorRT-RTX" : "TensorRT 11") + " builds strongly typed networks: precision comes from the ONNX graph, not from builder "
                "flags or layer overrides; convert the model first (convert-float16, convert-bfloat16, quantize-int8)");
        }
#else
        if (cfg->strongly_typed && (cfg->fp16 || cfg->bf16 || cfg->int8 || cfg->nb_layer_precisions > 0))
        {
            return fail(error, "a strongly typed network takes its precision from the graph; drop the precision flags");
        }
#endif
        preloadBuilderResources(*lib);
        Owned<nvinfer1::IBuilder> builder(
            static_cast<nvinfer1::IBuilder*>(lib->createBuilder(&lib->logger, NV_TENSORRT_VERSION)));
        if (!builder)
        {
            return fail(error, "createInferBuilder failed", lib->logger.errors());
        }
        nvinfer1::NetworkDefinitionCreationFlags networkFlags = 0;
#if !INFOPT_TRT_STRONGLY_TYPED_ONLY
        // TensorRT 11 and RTX are always strongly typed (the flag is deprecated there).
        if (cfg->strongly_typed)
        {
            networkFlags |= 1U << static_cast<uint32_t>(nvinfer1::NetworkDefinitionCreationFlag::kSTRONGLY_TYPED);
        }
#endif
        Owned<nvinfer1::INetworkDefinition> network(builder->createNetworkV2(networkFlags));
        if (!network)
        {
            return fail(error, "createNetworkV2 failed", lib->logger.errors());
        }
        Owned<nvonnxparser::IParser> parser(static_cast<nvonnxparser::IParser*>(
            lib->createParser(network.get(), &lib->logger, NV_ONNX_PARSER_VERSION)));
        if (!parser)
        {
            return fail(error, "createNvOnnxParser failed", lib->logger.errors());
        }
        if (!parser->parse(onnx, static_cast<size_t>(onnx_size), cfg->model_path))
        {
            std::string detail;
            for (int i = 0; i < parser->getNbErrors(); ++i)
            {
                nvonnxparser::IParserError const* e = parser->getError(i);
                if (!detail.empty())
                {
                    detail += "; ";
                }
                char const* node = e->nodeName();
                char const* op = e->nodeOperator();
                if (node != nullptr && node[0] != '\0')
                {
                    detail += "node `" + std::string(node) + "`";
                    if (op != nullptr && op[0] != '\0')
                    {
                        detail += " (" + std::string(op) + ")";
                    }
                    detail += ": ";
                }
                detail += e->desc();
            }
            return fail(error, "the TensorRT ONNX parser rejected the model", detail.empty() ? lib->logger.errors() : detail);
        }

        Owned<nvinfer1::IBuilderConfig> config(builder->createBuilderConfig());
        if (!config)
        {
            return fail(error, "createBuilderConfig failed", lib->logger.errors());
        }
        if (cfg->workspace_bytes > 0)
        {
            config->setMemoryPoolLimit(nvinfer1::MemoryPoolType::kWORKSPACE, static_cast<size_t>(cfg->workspace_bytes));
        }
        if (cfg->opt_level >= 0)
        {
            config->setBuilderOptimizationLevel(cfg->opt_level);
        }
        // Layer names and formats in the inspector's JSON, and the builder's "Layers:"
        // message with every kernel's datatypes and fused ONNX nodes.
        config->setProfilingVerbosity(nvinfer1::ProfilingVerbosity::kDETAILED);

        std::string problem;
        if (!addProfile(*builder, *network, *config, *cfg, problem))
        {
            return fail(error, problem);
        }
#if !INFOPT_TRT_STRONGLY_TYPED_ONLY
        if (!applyPrecision(*network, *config, *cfg, problem))
        {
            return fail(error, problem);
        }
#endif
        if (!applyComputeCapabilities(*config, *cfg, problem))
        {
            return fail(error, problem);
        }
#if !INFOPT_TRT_RTX
        // TensorRT-RTX deprecates the timing cache as a no-op; the caller is told so.
        Owned<nvinfer1::ITimingCache> cache(config->createTimingCache(
            cfg->timing_cache_size > 0 ? cfg->timing_cache : nullptr, static_cast<size_t>(cfg->timing_cache_size)));
        if (!cache)
        {
            return fail(error, "TensorRT cannot read the timing cache (corrupt, or from another TensorRT version)",
                lib->logger.errors());
        }
        if (!config->setTimingCache(*cache, /*ignoreMismatch=*/false))
        {
            return fail(error, "the timing cache was made on another device or TensorRT version", lib->logger.errors());
        }
        if (cfg->error_on_timing_cache_miss)
        {
            config->setFlag(nvinfer1::BuilderFlag::kERROR_ON_TIMING_CACHE_MISS);
        }
#endif

        Owned<nvinfer1::IHostMemory> plan(builder->buildSerializedNetwork(*network, *config));
        if (!plan || plan->size() == 0)
        {
            std::string log = lib->logger.buildLog();
            out->build_log = log.empty() ? nullptr : dupString(log);
            return fail(error, "TensorRT failed to build the engine", lib->logger.errors());
        }

#if !INFOPT_TRT_RTX
        nvinfer1::ITimingCache const* used = config->getTimingCache();
        Owned<nvinfer1::IHostMemory> cacheBlob(used != nullptr ? used->serialize() : nullptr);
#else
        Owned<nvinfer1::IHostMemory> cacheBlob;
#endif

        // Without a GPU, deserializing fails (and adds CUDA errors to the log): the
        // caller then reads the layers from the build log instead.
        std::string json;
        if (cfg->inspect_engine)
        {
            std::string inspectError;
            json = inspectEngine(*lib, static_cast<uint8_t const*>(plan->data()), plan->size(), inspectError);
            if (!inspectError.empty())
            {
                return fail(error, inspectError, lib->logger.errors());
            }
        }
        std::string buildLog = lib->logger.buildLog();

        out->engine = dupBytes(plan->data(), plan->size());
        out->engine_size = plan->size();
        if (cacheBlob && cacheBlob->size() > 0)
        {
            out->timing_cache = dupBytes(cacheBlob->data(), cacheBlob->size());
            out->timing_cache_size = cacheBlob->size();
        }
        out->layer_json = dupString(json);
        out->build_log = buildLog.empty() ? nullptr : dupString(buildLog);
        std::string warnings = lib->logger.warnings();
        out->warnings = warnings.empty() ? nullptr : dupString(warnings);
        if (out->engine == nullptr || out->layer_json == nullptr
            || (!buildLog.empty() && out->build_log == nullptr)
            || (out->timing_cache_size > 0 && out->timing_cache == nullptr))
        {
            infopt_trt_free_build_result(out);
            return fail(error, "out of memory copying the engine");
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        return fail(error, std::string("TensorRT shim: ") + e.what());
    }
}

int32_t infopt_trt_time(InfoptTrtLib* lib, uint8_t const* engineData, uint64_t engine_size, InfoptTrtShape const* shapes,
    uint64_t nb_shapes, int32_t warmup, int32_t runs, float* times_ms, char** error)
{
    if (lib == nullptr || engineData == nullptr || times_ms == nullptr || runs <= 0 || warmup < 0)
    {
        return fail(error, "infopt_trt_time: bad argument");
    }
    std::lock_guard<std::mutex> lock(lib->callMutex);
    lib->logger.clear();
    try
    {
        std::string problem;
        if (!loadCuda(*lib, nullptr, problem))
        {
            return missing(error, problem);
        }
        CudaApi const& cuda = lib->cuda;
        // Declared first so that it is released last: buffers and output allocators must
        // outlive the execution context that points at them.
        TimingResources res(cuda);
        Owned<nvinfer1::IRuntime> runtime(
            static_cast<nvinfer1::IRuntime*>(lib->createRuntime(&lib->logger, NV_TENSORRT_VERSION)));
        if (!runtime)
        {
            return fail(error, "createInferRuntime failed", lib->logger.errors());
        }
        Owned<nvinfer1::ICudaEngine> engine(runtime->deserializeCudaEngine(engineData, static_cast<size_t>(engine_size)));
        if (!engine)
        {
            return fail(error, "TensorRT cannot deserialize the engine (built by another TensorRT version or GPU?)",
                lib->logger.errors());
        }
        Owned<nvinfer1::IExecutionContext> context(engine->createExecutionContext());
        if (!context)
        {
            return fail(error, "createExecutionContext failed", lib->logger.errors());
        }
        CudaError status = cuda.streamCreate(&res.stream);
        if (status == 0)
        {
            status = cuda.eventCreate(&res.start);
        }
        if (status == 0)
        {
            status = cuda.eventCreate(&res.stop);
        }
        if (status != 0)
        {
            return fail(error, "CUDA: " + cudaText(cuda, status));
        }
        if (!setInputShapes(*engine, *context, shapes, nb_shapes, problem))
        {
            return fail(error, problem, lib->logger.errors());
        }
        for (int32_t i = 0; i < engine->getNbIOTensors(); ++i)
        {
            char const* name = engine->getIOTensorName(i);
            bool input = engine->getTensorIOMode(name) == nvinfer1::TensorIOMode::kINPUT;
            nvinfer1::Dims dims = context->getTensorShape(name);
            if (!input && isDynamic(dims))
            {
                // Data-dependent output size: TensorRT asks for memory during enqueue.
                res.outputs.emplace_back(new GrowingOutput(cuda));
                if (!context->setOutputAllocator(name, res.outputs.back().get()))
                {
                    return fail(error, "output `" + std::string(name) + "`: setOutputAllocator failed",
                        lib->logger.errors());
                }
                continue;
            }
            uint64_t count = 1;
            for (int32_t d = 0; d < dims.nbDims; ++d)
            {
                count *= static_cast<uint64_t>(dims.d[d] < 0 ? 0 : dims.d[d]);
            }
            nvinfer1::DataType type = engine->getTensorDataType(name);
            uint64_t bytes = byteSize(type, count);
            if (bytes == 0 && count > 0)
            {
                return fail(error, std::string(input ? "input" : "output") + " `" + name + "` has data type "
                        + std::to_string(static_cast<int32_t>(type)) + ", which timing does not allocate");
            }
            void* ptr = nullptr;
            status = cuda.malloc(&ptr, bytes == 0 ? 1 : static_cast<size_t>(bytes));
            if (status != 0)
            {
                return fail(error, "cudaMalloc of " + std::to_string(bytes) + " bytes for `" + name
                        + "`: " + cudaText(cuda, status));
            }
            res.buffers.push_back(ptr);
            if (input && bytes > 0)
            {
                status = cuda.memset(ptr, 0, static_cast<size_t>(bytes));
                if (status != 0)
                {
                    return fail(error, "cudaMemset: " + cudaText(cuda, status));
                }
            }
            if (!context->setTensorAddress(name, ptr))
            {
                return fail(error, "setTensorAddress `" + std::string(name) + "` failed", lib->logger.errors());
            }
        }
        for (int32_t i = 0; i < warmup; ++i)
        {
            if (!context->enqueueV3(res.stream))
            {
                return fail(error, "enqueueV3 failed during warm-up", lib->logger.errors());
            }
        }
        status = cuda.streamSynchronize(res.stream);
        if (status != 0)
        {
            return fail(error, "CUDA after warm-up: " + cudaText(cuda, status), lib->logger.errors());
        }
        for (int32_t i = 0; i < runs; ++i)
        {
            status = cuda.eventRecord(res.start, res.stream);
            if (status == 0 && !context->enqueueV3(res.stream))
            {
                return fail(error, "enqueueV3 failed", lib->logger.errors());
            }
            if (status == 0)
            {
                status = cuda.eventRecord(res.stop, res.stream);
            }
            if (status == 0)
            {
                status = cuda.eventSynchronize(res.stop);
            }
            float ms = 0.0F;
            if (status == 0)
            {
                status = cuda.eventElapsedTime(&ms, res.start, res.stop);
            }
            if (status != 0)
            {
                return fail(error, "CUDA while timing: " + cudaText(cuda, status), lib->logger.errors());
            }
            times_ms[i] = ms;
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        return fail(error, std::string("TensorRT shim: ") + e.what());
    }
}

void infopt_trt_free(void* ptr)
{
    std::free(ptr);
}

void infopt_trt_free_build_result(InfoptTrtBuildResult* result)
{
    if (result == nullptr)
    {
        return;
    }
    std::free(result->engine);
    std::free(result->timing_cache);
    std::free(result->layer_json);
    std::free(result->warnings);
    std::free(result->build_log);
    std::memset(result, 0, sizeof(*result));
}

void infopt_trt_close(InfoptTrtLib* lib)
{
    delete lib;
}

} // extern "C"
