/* The part of Triton Inference Server's C API that the tcinfer backend uses, declared here from
 * Triton's documented interface (tritonserver.h and tritonbackend.h of the triton-inference-server
 * `core` repository, release r24.10 = Triton 2.51.0, the server inside nvidia-pytriton 0.7.0):
 * no registry ships those headers, and the backend needs only these declarations.
 *
 * Follows TRITONBACKEND API version 1.19 (TRITONBACKEND_ApiVersion of Triton 2.51 reports it);
 * the backend refuses to load into a server whose major version differs or whose minor version is
 * older (TRITONBACKEND_Initialize). The enum values below are those of that version: Triton keeps
 * them stable within a major version.
 *
 * Everything Triton hands out here (requests, inputs, outputs, strings) belongs to Triton; what
 * the backend creates (errors, messages, responses) it deletes or hands over as each function
 * below says. */
#ifndef TCI_TRITON_API_H
#define TCI_TRITON_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCI_TRITONBACKEND_API_MAJOR 1u
#define TCI_TRITONBACKEND_API_MINOR 19u

/* what the backend defines and Triton looks up by name */
#define TCI_TRITON_EXPORT __attribute__((visibility("default")))

/* ---- TRITONSERVER: errors, messages, logging ---- */

typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;

typedef enum TRITONSERVER_errorcode_enum {
    TRITONSERVER_ERROR_UNKNOWN = 0,
    TRITONSERVER_ERROR_INTERNAL = 1,
    TRITONSERVER_ERROR_NOT_FOUND = 2,
    TRITONSERVER_ERROR_INVALID_ARG = 3,
    TRITONSERVER_ERROR_UNAVAILABLE = 4,
    TRITONSERVER_ERROR_UNSUPPORTED = 5,
    TRITONSERVER_ERROR_ALREADY_EXISTS = 6,
    TRITONSERVER_ERROR_CANCELLED = 7,
} TRITONSERVER_Error_Code;

/* A new error (the message is copied); the caller owns it until it hands it to Triton by
 * returning it, or deletes it. */
TRITONSERVER_Error *TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char *msg);
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *error);
TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error *error);
/* valid as long as the error */
const char *TRITONSERVER_ErrorMessage(TRITONSERVER_Error *error);

/* A message holding a copy of the JSON text (base, byte_size). */
TRITONSERVER_Error *TRITONSERVER_MessageNewFromSerializedJson(TRITONSERVER_Message **message,
                                                              const char *base, size_t byte_size);
TRITONSERVER_Error *TRITONSERVER_MessageDelete(TRITONSERVER_Message *message);
/* The JSON text of a message (not NUL-terminated), valid as long as the message. */
TRITONSERVER_Error *TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message *message,
                                                        const char **base, size_t *byte_size);

typedef enum TRITONSERVER_loglevel_enum {
    TRITONSERVER_LOG_INFO = 0,
    TRITONSERVER_LOG_WARN = 1,
    TRITONSERVER_LOG_ERROR = 2,
    TRITONSERVER_LOG_VERBOSE = 3,
} TRITONSERVER_LogLevel;

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level);
TRITONSERVER_Error *TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char *filename,
                                            const int line, const char *msg);

/* ---- TRITONSERVER: tensors and memory ---- */

typedef enum TRITONSERVER_datatype_enum {
    TRITONSERVER_TYPE_INVALID = 0,
    TRITONSERVER_TYPE_BOOL = 1,
    TRITONSERVER_TYPE_UINT8 = 2,
    TRITONSERVER_TYPE_UINT16 = 3,
    TRITONSERVER_TYPE_UINT32 = 4,
    TRITONSERVER_TYPE_UINT64 = 5,
    TRITONSERVER_TYPE_INT8 = 6,
    TRITONSERVER_TYPE_INT16 = 7,
    TRITONSERVER_TYPE_INT32 = 8,
    TRITONSERVER_TYPE_INT64 = 9,
    TRITONSERVER_TYPE_FP16 = 10,
    TRITONSERVER_TYPE_FP32 = 11,
    TRITONSERVER_TYPE_FP64 = 12,
    TRITONSERVER_TYPE_BYTES = 13,
    TRITONSERVER_TYPE_BF16 = 14,
} TRITONSERVER_DataType;

typedef enum TRITONSERVER_memorytype_enum {
    TRITONSERVER_MEMORY_CPU = 0,
    TRITONSERVER_MEMORY_CPU_PINNED = 1,
    TRITONSERVER_MEMORY_GPU = 2,
} TRITONSERVER_MemoryType;

typedef enum TRITONSERVER_instancegroupkind_enum {
    TRITONSERVER_INSTANCEGROUPKIND_AUTO = 0,
    TRITONSERVER_INSTANCEGROUPKIND_CPU = 1,
    TRITONSERVER_INSTANCEGROUPKIND_GPU = 2,
    TRITONSERVER_INSTANCEGROUPKIND_MODEL = 3,
} TRITONSERVER_InstanceGroupKind;

/* TRITONBACKEND_RequestRelease: the backend is done with the request */
#define TCI_TRITONSERVER_REQUEST_RELEASE_ALL 1u
/* TRITONBACKEND_ResponseSend: the last response of its request */
#define TCI_TRITONSERVER_RESPONSE_COMPLETE_FINAL 1u

/* ---- TRITONBACKEND ---- */

typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;

typedef enum TRITONBACKEND_artifacttype_enum {
    TRITONBACKEND_ARTIFACT_FILESYSTEM = 0,
} TRITONBACKEND_ArtifactType;

/* The API version of the running server. */
TRITONSERVER_Error *TRITONBACKEND_ApiVersion(uint32_t *major, uint32_t *minor);

/* models */
TRITONSERVER_Error *TRITONBACKEND_ModelName(TRITONBACKEND_Model *model, const char **name);
TRITONSERVER_Error *TRITONBACKEND_ModelVersion(TRITONBACKEND_Model *model, uint64_t *version);
/* location: the model's folder in the repository (holding config.pbtxt and the version folders) */
TRITONSERVER_Error *TRITONBACKEND_ModelRepository(TRITONBACKEND_Model *model,
                                                  TRITONBACKEND_ArtifactType *artifact_type,
                                                  const char **location);
/* The model configuration as JSON (config_version 1); the caller deletes the message. */
TRITONSERVER_Error *TRITONBACKEND_ModelConfig(TRITONBACKEND_Model *model,
                                              const uint32_t config_version,
                                              TRITONSERVER_Message **model_config);
/* Whether the server runs with auto-completion of configurations (the default). */
TRITONSERVER_Error *TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model *model,
                                                          bool *auto_complete_config);
/* Replaces the configuration (only during TRITONBACKEND_ModelInitialize); the message stays the
 * caller's. */
TRITONSERVER_Error *TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model *model,
                                                 const uint32_t config_version,
                                                 TRITONSERVER_Message *model_config);
TRITONSERVER_Error *TRITONBACKEND_ModelState(TRITONBACKEND_Model *model, void **state);
TRITONSERVER_Error *TRITONBACKEND_ModelSetState(TRITONBACKEND_Model *model, void *state);

/* model instances */
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance *instance,
                                                    const char **name);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance *instance,
                                                    TRITONSERVER_InstanceGroupKind *kind);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance *instance,
                                                        int32_t *device_id);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance *instance,
                                                     TRITONBACKEND_Model **model);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance *instance,
                                                     void **state);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance *instance,
                                                        void *state);
/* Statistics of one request (timestamps in ns of the steady clock, CLOCK_MONOTONIC) ... */
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request, const bool success,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);
/* ... and of one batched execution of batch_size items. */
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance *instance, const uint64_t batch_size,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);

/* requests */
TRITONSERVER_Error *TRITONBACKEND_RequestId(TRITONBACKEND_Request *request, const char **id);
TRITONSERVER_Error *TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request *request,
                                                    uint32_t *count);
TRITONSERVER_Error *TRITONBACKEND_RequestInputName(TRITONBACKEND_Request *request,
                                                   const uint32_t index, const char **input_name);
TRITONSERVER_Error *TRITONBACKEND_RequestInput(TRITONBACKEND_Request *request, const char *name,
                                               TRITONBACKEND_Input **input);
TRITONSERVER_Error *TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request *request,
                                                     uint32_t *count);
TRITONSERVER_Error *TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request *request,
                                                    const uint32_t index,
                                                    const char **output_name);
/* Hands the request back to Triton; on success it must not be used any more. */
TRITONSERVER_Error *TRITONBACKEND_RequestRelease(TRITONBACKEND_Request *request,
                                                 uint32_t release_flags);

/* inputs: byte_size is what the client sent, which need not match shape and datatype */
TRITONSERVER_Error *TRITONBACKEND_InputProperties(TRITONBACKEND_Input *input, const char **name,
                                                  TRITONSERVER_DataType *datatype,
                                                  const int64_t **shape, uint32_t *dims_count,
                                                  uint64_t *byte_size, uint32_t *buffer_count);
/* Buffer `index` of an input; memory_type and memory_type_id: in, the preferred ones; out, where
 * the buffer really is. */
TRITONSERVER_Error *TRITONBACKEND_InputBuffer(TRITONBACKEND_Input *input, const uint32_t index,
                                              const void **buffer, uint64_t *buffer_byte_size,
                                              TRITONSERVER_MemoryType *memory_type,
                                              int64_t *memory_type_id);

/* responses: all outputs of a response are created (with their buffers) before the next
 * response of the same request */
TRITONSERVER_Error *TRITONBACKEND_ResponseNew(TRITONBACKEND_Response **response,
                                              TRITONBACKEND_Request *request);
TRITONSERVER_Error *TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response *response);
TRITONSERVER_Error *TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response *response,
                                                 TRITONBACKEND_Output **output, const char *name,
                                                 const TRITONSERVER_DataType datatype,
                                                 const int64_t *shape, const uint32_t dims_count);
/* As TRITONBACKEND_InputBuffer: memory_type in, the preferred one; out, the buffer's. */
TRITONSERVER_Error *TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output *output, void **buffer,
                                               const uint64_t buffer_byte_size,
                                               TRITONSERVER_MemoryType *memory_type,
                                               int64_t *memory_type_id);
/* Sends the response (success: error NULL) and takes it over; the error stays the caller's. */
TRITONSERVER_Error *TRITONBACKEND_ResponseSend(TRITONBACKEND_Response *response,
                                               const uint32_t send_flags,
                                               TRITONSERVER_Error *error);

/* ---- what the backend defines (only ModelInstanceExecute is required by Triton) ---- */
TCI_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend);
TCI_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model);
TCI_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model);
TCI_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance *instance);
TCI_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance *instance);
/* Runs requests; the backend releases every request (and sends its response) itself. */
TCI_TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request **requests,
    const uint32_t request_count);

#ifdef __cplusplus
}
#endif

#endif /* TCI_TRITON_API_H */
