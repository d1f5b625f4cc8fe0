/*
 * The part of ONNX Runtime's C API the runner calls, declared here: the library is loaded with
 * dlopen at run time and never linked, and its header ships with no package this one depends on.
 *
 * OrtApi is a table of function pointers that only ever grows at its end: a function's position
 * is its ABI. Each one used here sits at its published position (counted from 0, written beside
 * it); the positions between are padding. Every function used is in the table since API version 1,
 * which is the version asked for: any ONNX Runtime 1.x serves it.
 */
#ifndef FASTIFY_TRITON_SHM_ORT_API_H
#define FASTIFY_TRITON_SHM_ORT_API_H

#include <stddef.h>
#include <stdint.h>

#define ORT_RUNNER_API_VERSION 1

typedef struct OrtEnv OrtEnv;
typedef struct OrtStatus OrtStatus;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtSession OrtSession;
typedef struct OrtValue OrtValue;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtAllocator OrtAllocator;

/* ONNX's TensorProto.DataType numbering, which ONNX Runtime keeps. */
enum { ORT_ELEMENT_UNDEFINED = 0, ORT_ELEMENT_TYPE_COUNT = 17 };
enum { ORT_ONNX_TYPE_TENSOR = 1 };
enum { ORT_LOGGING_LEVEL_WARNING = 2 };
enum { ORT_DEVICE_ALLOCATOR = 0, ORT_MEM_TYPE_DEFAULT = 0 };

typedef struct OrtApi {
  OrtStatus *(*CreateStatus)(int code, const char *message);                                  /* 0 */
  int (*GetErrorCode)(const OrtStatus *status);                                                /* 1 */
  const char *(*GetErrorMessage)(const OrtStatus *status);                                     /* 2 */
  OrtStatus *(*CreateEnv)(int log_severity_level, const char *log_id, OrtEnv **out);            /* 3 */
  void *unused_4_to_5[2];
  OrtStatus *(*DisableTelemetryEvents)(const OrtEnv *env);                                     /* 6 */
  OrtStatus *(*CreateSession)(const OrtEnv *env, const char *model_path, const OrtSessionOptions *options,
                              OrtSession **out);                                               /* 7 */
  OrtStatus *(*CreateSessionFromArray)(const OrtEnv *env, const void *model_data, size_t model_data_length,
                                       const OrtSessionOptions *options, OrtSession **out);   /* 8 */
  OrtStatus *(*Run)(OrtSession *session, const OrtRunOptions *run_options, const char *const *input_names,
                    const OrtValue *const *inputs, size_t input_count, const char *const *output_names,
                    size_t output_count, OrtValue **outputs);                                  /* 9 */
  OrtStatus *(*CreateSessionOptions)(OrtSessionOptions **out);                                 /* 10 */
  void *unused_11_to_21[11];
  OrtStatus *(*SetSessionLogSeverityLevel)(OrtSessionOptions *options, int level);             /* 22 */
  OrtStatus *(*SetSessionGraphOptimizationLevel)(OrtSessionOptions *options, int level);       /* 23 */
  OrtStatus *(*SetIntraOpNumThreads)(OrtSessionOptions *options, int threads);                 /* 24 */
  OrtStatus *(*SetInterOpNumThreads)(OrtSessionOptions *options, int threads);                 /* 25 */
  void *unused_26_to_29[4];
  OrtStatus *(*SessionGetInputCount)(const OrtSession *session, size_t *out);                  /* 30 */
  OrtStatus *(*SessionGetOutputCount)(const OrtSession *session, size_t *out);                 /* 31 */
  void *unused_32;
  OrtStatus *(*SessionGetInputTypeInfo)(const OrtSession *session, size_t index, OrtTypeInfo **out);   /* 33 */
  OrtStatus *(*SessionGetOutputTypeInfo)(const OrtSession *session, size_t index, OrtTypeInfo **out);  /* 34 */
  void *unused_35;
  OrtStatus *(*SessionGetInputName)(const OrtSession *session, size_t index, OrtAllocator *allocator,
                                    char **out);                                               /* 36 */
  OrtStatus *(*SessionGetOutputName)(const OrtSession *session, size_t index, OrtAllocator *allocator,
                                     char **out);                                              /* 37 */
  void *unused_38;
  OrtStatus *(*CreateRunOptions)(OrtRunOptions **out);                                         /* 39 */
  void *unused_40_to_45[6];
  OrtStatus *(*RunOptionsSetTerminate)(OrtRunOptions *options);                                /* 46 */
  void *unused_47_to_48[2];
  OrtStatus *(*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo *info, void *data, size_t data_length,
                                               const int64_t *shape, size_t shape_length, int type,
                                               OrtValue **out);                                /* 49 */
  void *unused_50;
  OrtStatus *(*GetTensorMutableData)(OrtValue *value, void **out);                             /* 51 */
  void *unused_52_to_54[3];
  OrtStatus *(*CastTypeInfoToTensorInfo)(const OrtTypeInfo *info, const OrtTensorTypeAndShapeInfo **out); /* 55 */
  OrtStatus *(*GetOnnxTypeFromTypeInfo)(const OrtTypeInfo *info, int *out);                    /* 56 */
  void *unused_57_to_59[3];
  OrtStatus *(*GetTensorElementType)(const OrtTensorTypeAndShapeInfo *info, int *out);         /* 60 */
  OrtStatus *(*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo *info, size_t *out);        /* 61 */
  OrtStatus *(*GetDimensions)(const OrtTensorTypeAndShapeInfo *info, int64_t *dims, size_t count); /* 62 */
  OrtStatus *(*GetSymbolicDimensions)(const OrtTensorTypeAndShapeInfo *info, const char **names,
                                      size_t count);                                           /* 63 */
  OrtStatus *(*GetTensorShapeElementCount)(const OrtTensorTypeAndShapeInfo *info, size_t *out);   /* 64 */
  OrtStatus *(*GetTensorTypeAndShape)(const OrtValue *value, OrtTensorTypeAndShapeInfo **out); /* 65 */
  void *unused_66_to_68[3];
  OrtStatus *(*CreateCpuMemoryInfo)(int allocator_type, int mem_type, OrtMemoryInfo **out);    /* 69 */
  void *unused_70_to_75[6];
  OrtStatus *(*AllocatorFree)(OrtAllocator *allocator, void *pointer);                         /* 76 */
  void *unused_77;
  OrtStatus *(*GetAllocatorWithDefaultOptions)(OrtAllocator **out);                            /* 78 */
  void *unused_79_to_91[13];
  void (*ReleaseEnv)(OrtEnv *env);                                                             /* 92 */
  void (*ReleaseStatus)(OrtStatus *status);                                                    /* 93 */
  void (*ReleaseMemoryInfo)(OrtMemoryInfo *info);                                              /* 94 */
  void (*ReleaseSession)(OrtSession *session);                                                 /* 95 */
  void (*ReleaseValue)(OrtValue *value);                                                       /* 96 */
  void (*ReleaseRunOptions)(OrtRunOptions *options);                                           /* 97 */
  void (*ReleaseTypeInfo)(OrtTypeInfo *info);                                                  /* 98 */
  void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo *info);                      /* 99 */
  void (*ReleaseSessionOptions)(OrtSessionOptions *options);                                   /* 100 */
} OrtApi;

/* What OrtGetApiBase() returns: the table for a version, and the library's own version. */
typedef struct OrtApiBase {
  const OrtApi *(*GetApi)(uint32_t version);
  const char *(*GetVersionString)(void);
} OrtApiBase;

/* The padding above must put each function where the published table has it. */
#define ORT_POSITION(member, position) \
  _Static_assert(offsetof(OrtApi, member) == (position) * sizeof(void *), #member " is at position " #position)
ORT_POSITION(CreateEnv, 3);
ORT_POSITION(DisableTelemetryEvents, 6);
ORT_POSITION(CreateSession, 7);
ORT_POSITION(CreateSessionOptions, 10);
ORT_POSITION(SetSessionLogSeverityLevel, 22);
ORT_POSITION(SessionGetInputCount, 30);
ORT_POSITION(SessionGetInputTypeInfo, 33);
ORT_POSITION(SessionGetInputName, 36);
ORT_POSITION(CreateRunOptions, 39);
ORT_POSITION(RunOptionsSetTerminate, 46);
ORT_POSITION(CreateTensorWithDataAsOrtValue, 49);
ORT_POSITION(GetTensorMutableData, 51);
ORT_POSITION(CastTypeInfoToTensorInfo, 55);
ORT_POSITION(GetTensorElementType, 60);
ORT_POSITION(GetTensorTypeAndShape, 65);
ORT_POSITION(CreateCpuMemoryInfo, 69);
ORT_POSITION(AllocatorFree, 76);
ORT_POSITION(GetAllocatorWithDefaultOptions, 78);
ORT_POSITION(ReleaseEnv, 92);
ORT_POSITION(ReleaseSessionOptions, 100);

#endif
