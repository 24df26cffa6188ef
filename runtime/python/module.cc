// operator_runtime._C: a thin pybind11 binding over the C ABI's generic
// operator table. It knows no operator by name, so adding an operator needs no
// change here. Descriptor (prepared runs) takes view tuples (data_ptr, dtype,
// shape, strides) built by the Python layer; run (cached_call.cc) takes the
// tensors themselves. Failures raise _C.Error(status, message).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <operator_runtime/api.h>

#include "runtime/python/cached_call.h"
#include "runtime/python/torch_kernels.h"

namespace py = pybind11;

namespace {

// Inputs are gathered into a stack array on the execute hot path; no operator
// comes close to this many.
constexpr int32_t kMaxInputs = 8;

[[noreturn]] void raise_error(oprt_status_t status, const std::string& message) {
  oprt_python::set_error(status, message.empty() ? oprt_status_string(status) : message);
  throw py::error_already_set();
}

// Reads the thread's message right after the failing call, before any later
// call on this thread clears it.
[[noreturn]] void raise_last_error(oprt_status_t status) {
  raise_error(status, oprt_last_error_message());
}

oprt_tensor_view_t parse_view(const char* op, const char* role, py::handle view_object) {
  auto fields = py::reinterpret_borrow<py::sequence>(view_object);
  if (py::len(fields) != 4) {
    raise_error(OPRT_ERR_INVALID_ARG, std::string(op) + ": " + role +
                                          " view must be (data_ptr, dtype, shape, strides)");
  }
  auto shape = py::reinterpret_borrow<py::sequence>(fields[2]);
  auto strides = py::reinterpret_borrow<py::sequence>(fields[3]);
  const size_t ndim = py::len(shape);
  if (py::len(strides) != ndim) {
    raise_error(OPRT_ERR_INVALID_ARG, std::string(op) + ": " + role + " has " +
                                          std::to_string(ndim) + " extents but " +
                                          std::to_string(py::len(strides)) + " strides");
  }
  if (ndim > OPRT_MAX_DIMS) {
    raise_error(OPRT_ERR_INVALID_ARG, std::string(op) + ": " + role + " has ndim " +
                                          std::to_string(ndim) + ", more than the supported " +
                                          std::to_string(OPRT_MAX_DIMS));
  }
  oprt_tensor_view_t view{};
  view.data = reinterpret_cast<void*>(fields[0].cast<uintptr_t>());
  view.dtype = static_cast<oprt_dtype_t>(fields[1].cast<int>());
  view.ndim = static_cast<int32_t>(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    view.shape[d] = shape[d].cast<int64_t>();
    view.strides[d] = strides[d].cast<int64_t>();
  }
  return view;
}

class Descriptor {
 public:
  Descriptor(const std::string& op_name, int backend, py::handle out, py::sequence inputs,
             py::sequence params)
      : backend_(static_cast<oprt_backend_t>(backend)) {
    op_ = oprt_find_operator(op_name.c_str());
    if (op_ == nullptr) raise_last_error(OPRT_ERR_NOT_SUPPORTED);
    const char* name = op_->name;
    if (op_->num_inputs > kMaxInputs) {
      raise_error(OPRT_ERR_NOT_SUPPORTED,
                  std::string(name) + ": the binding supports at most " +
                      std::to_string(kMaxInputs) + " inputs");
    }
    if (static_cast<int32_t>(py::len(inputs)) != op_->num_inputs) {
      raise_error(OPRT_ERR_INVALID_ARG, std::string(name) + ": expected " +
                                            std::to_string(op_->num_inputs) + " inputs, got " +
                                            std::to_string(py::len(inputs)));
    }
    if (static_cast<int32_t>(py::len(params)) != op_->num_params) {
      raise_error(OPRT_ERR_INVALID_ARG, std::string(name) + ": expected " +
                                            std::to_string(op_->num_params) + " params, got " +
                                            std::to_string(py::len(params)));
    }
    const oprt_tensor_view_t out_view = parse_view(name, "out", out);
    std::vector<oprt_tensor_view_t> input_views;
    for (int32_t i = 0; i < op_->num_inputs; ++i) {
      input_views.push_back(parse_view(name, op_->input_names[i], inputs[i]));
    }
    std::vector<const oprt_tensor_view_t*> input_view_ptrs;
    for (const auto& view : input_views) input_view_ptrs.push_back(&view);
    layouts_.push_back(layout_of(out_view));
    for (const auto& view : input_views) layouts_.push_back(layout_of(view));
    std::vector<double> param_values;
    for (py::handle param : params) param_values.push_back(param.cast<double>());

    oprt_status_t status;
    std::string message;
    {
      // Create may probe devices; other Python threads can run meanwhile.
      py::gil_scoped_release release;
      status = op_->create(&desc_, backend_, &out_view, input_view_ptrs.data(),
                           param_values.data());
      if (status != OPRT_SUCCESS) message = oprt_last_error_message();
    }
    if (status != OPRT_SUCCESS) raise_error(status, message);

    status = op_->get_workspace_size(desc_, &workspace_size_);
    if (status != OPRT_SUCCESS) {
      message = oprt_last_error_message();
      op_->destroy(desc_);
      desc_ = nullptr;
      raise_error(status, message);
    }
  }

  ~Descriptor() {
    if (prepared_id_ != 0) oprt_python::unregister_prepared(prepared_id_);
    if (desc_ != nullptr) op_->destroy(desc_);
  }

  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  // The prepared-run hot path: no allocation, one pass over the input pointers.
  void execute(uintptr_t out, py::handle inputs, uintptr_t stream, uintptr_t workspace,
               size_t workspace_size) {
    if (desc_ == nullptr) {
      raise_error(OPRT_ERR_INVALID_ARG, std::string(op_->name) + ": descriptor was destroyed");
    }
    PyObject* sequence = PySequence_Fast(inputs.ptr(), "inputs must be a sequence of data pointers");
    if (sequence == nullptr) throw py::error_already_set();
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    if (count != op_->num_inputs) {
      Py_DECREF(sequence);
      raise_error(OPRT_ERR_INVALID_ARG, std::string(op_->name) + ": expected " +
                                            std::to_string(op_->num_inputs) +
                                            " input pointers, got " + std::to_string(count));
    }
    const void* input_ptrs[kMaxInputs];
    PyObject** items = PySequence_Fast_ITEMS(sequence);
    for (Py_ssize_t i = 0; i < count; ++i) input_ptrs[i] = PyLong_AsVoidPtr(items[i]);
    Py_DECREF(sequence);
    if (PyErr_Occurred()) throw py::error_already_set();

    oprt_status_t status;
    std::string message;
    {
      py::gil_scoped_release release;
      status = op_->execute(desc_, reinterpret_cast<void*>(workspace), workspace_size,
                            reinterpret_cast<void*>(out), input_ptrs,
                            reinterpret_cast<void*>(stream));
      if (status != OPRT_SUCCESS) message = oprt_last_error_message();
    }
    if (status != OPRT_SUCCESS) raise_error(status, message);
  }

  // Reads the bound tensors as they are now and refuses any whose dtype, shape,
  // strides or device differ from create's (resize_, set_, t_()) or that reach
  // past their storage; fills the current data pointers.
  void read_bound(py::handle out, py::sequence inputs, int64_t device, void** out_ptr,
                  const void** input_ptrs) const {
    if (desc_ == nullptr) {
      raise_error(OPRT_ERR_INVALID_ARG, std::string(op_->name) + ": descriptor was destroyed");
    }
    if (static_cast<int32_t>(py::len(inputs)) != op_->num_inputs) {
      raise_error(OPRT_ERR_INVALID_ARG, std::string(op_->name) + ": expected " +
                                            std::to_string(op_->num_inputs) + " inputs, got " +
                                            std::to_string(py::len(inputs)));
    }
    for (int32_t i = 0; i <= op_->num_inputs; ++i) {
      const char* role = i == 0 ? "out" : op_->input_names[i - 1];
      py::handle tensor = i == 0 ? out : py::handle(inputs[i - 1]);
      oprt_python::Operand now;
      if (!oprt_python::read_operand(tensor.ptr(), &now, op_->name, role)) {
        throw py::error_already_set();
      }
      check_bound_layout(role, now, layouts_[i], device);
      if (i == 0) {
        *out_ptr = now.data;
      } else {
        input_ptrs[i - 1] = now.data;
      }
    }
  }

  // The prepared-run path of the Python side (library.PREPARED_RUN's fallback):
  // read_bound, then execute on the tensors' current data pointers.
  void run(py::handle out, py::sequence inputs, int64_t device, uintptr_t stream,
           uintptr_t workspace, size_t workspace_size) {
    void* out_ptr = nullptr;
    const void* input_ptrs[kMaxInputs];
    read_bound(out, inputs, device, &out_ptr, input_ptrs);
    void* const handle = desc_;
    oprt_status_t status;
    std::string message;
    {
      py::gil_scoped_release release;
      status = op_->execute(handle, reinterpret_cast<void*>(workspace), workspace_size, out_ptr,
                            input_ptrs, reinterpret_cast<void*>(stream));
      if (status != OPRT_SUCCESS) message = oprt_last_error_message();
    }
    if (status != OPRT_SUCCESS) raise_error(status, message);
  }

  // The id under which torch's _prepared_run op runs this descriptor on tensors
  // of device (their get_device()); registered on first use.
  int64_t prepared_id(int64_t device) {
    if (desc_ == nullptr) {
      raise_error(OPRT_ERR_INVALID_ARG, std::string(op_->name) + ": descriptor was destroyed");
    }
    if (prepared_id_ == 0) {
      prepared_id_ = oprt_python::register_prepared(op_, desc_, device, layouts_);
    }
    return prepared_id_;
  }

  void destroy() {
    if (desc_ == nullptr) return;
    if (prepared_id_ != 0) oprt_python::unregister_prepared(prepared_id_);
    prepared_id_ = 0;
    void* desc = desc_;
    desc_ = nullptr;
    const oprt_status_t status = op_->destroy(desc);
    if (status != OPRT_SUCCESS) raise_last_error(status);
  }

  // oprt_descriptor_plan as a dict: the keys every plan has, then its family's.
  py::dict plan() const {
    oprt_plan_t plan;
    const oprt_status_t status = oprt_descriptor_plan(op_->name, desc_, &plan);
    if (status != OPRT_SUCCESS) raise_last_error(status);
    auto dims = [&plan](const int64_t* values) {
      py::tuple dims(plan.ndim);
      for (int32_t d = 0; d < plan.ndim; ++d) dims[d] = py::int_(values[d]);
      return dims;
    };
    py::tuple in_strides(plan.num_inputs);
    for (int32_t i = 0; i < plan.num_inputs; ++i) in_strides[i] = dims(plan.in_strides[i]);
    py::dict result;
    result["kind"] = static_cast<int>(plan.kind);
    result["dtype"] = static_cast<int>(plan.dtype);
    result["num_inputs"] = plan.num_inputs;
    result["shape"] = dims(plan.shape);
    result["out_strides"] = dims(plan.out_strides);
    result["in_strides"] = in_strides;
    if (plan.kind == OPRT_KIND_ELEMENTWISE) {
      result["numel"] = plan.numel;
      result["contiguous"] = plan.contiguous != 0;
    } else {
      py::tuple in_axis_strides(plan.num_inputs);
      for (int32_t i = 0; i < plan.num_inputs; ++i) {
        in_axis_strides[i] = py::int_(plan.in_axis_strides[i]);
      }
      result["rows"] = plan.rows;
      result["row_length"] = plan.row_length;
      result["in_axis_strides"] = in_axis_strides;
      result["out_axis_stride"] = plan.out_axis_stride;
      result["row_splits"] = plan.row_splits;
      result["splits_share_cluster"] = plan.splits_share_cluster != 0;
    }
    return result;
  }

  size_t workspace_size() const { return workspace_size_; }
  int backend() const { return static_cast<int>(backend_); }
  std::string op_name() const { return op_->name; }
  bool destroyed() const { return desc_ == nullptr; }

 private:
  const oprt_operator_t* op_ = nullptr;
  void* desc_ = nullptr;
  oprt_backend_t backend_;
  size_t workspace_size_ = 0;
  std::vector<oprt_python::Operand> layouts_;  // out, then the inputs, as created
  int64_t prepared_id_ = 0;

  static oprt_python::Operand layout_of(const oprt_tensor_view_t& view) {
    oprt_python::Operand layout;
    layout.dtype = view.dtype;
    layout.ndim = view.ndim;
    std::copy(view.shape, view.shape + view.ndim, layout.shape);
    std::copy(view.strides, view.strides + view.ndim, layout.strides);
    return layout;
  }

  void check_bound_layout(const char* role, const oprt_python::Operand& now,
                          const oprt_python::Operand& created, int64_t device) const {
    const bool same = now.device == device && oprt_python::same_layout(now, created);
    if (same) return;
    auto dtype_text = [](int32_t code) -> std::string {
      switch (code) {
        case OPRT_DTYPE_F32: return "float32";
        case OPRT_DTYPE_F16: return "float16";
        case OPRT_DTYPE_BF16: return "bfloat16";
        default: return "dtype code " + std::to_string(code);
      }
    };
    auto text = [](const int64_t* values, int32_t ndim) {
      std::string result = "[";
      for (int d = 0; d < ndim; ++d) result += (d ? ", " : "") + std::to_string(values[d]);
      return result + "]";
    };
    raise_error(OPRT_ERR_INVALID_ARG,
                std::string(op_->name) + ": prepared run: " + role + " now has shape " +
                    text(now.shape, now.ndim) + ", strides " + text(now.strides, now.ndim) +
                    ", " + dtype_text(now.dtype) + " on " +
                    oprt_python::device_text(now.device) +
                    ", but the descriptor was created for shape " +
                    text(created.shape, created.ndim) + ", strides " +
                    text(created.strides, created.ndim) + ", " + dtype_text(created.dtype) +
                    " on " + oprt_python::device_text(device) +
                    " (was it resized, set_ or transposed in place?); prepare a new descriptor");
  }
};

// A Descriptor reached through `self`, refusing one made by Descriptor.__new__
// without its constructor (pybind11 would hand out uninitialised memory).
Descriptor& constructed(py::handle self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self.ptr());
  auto v_h = instance->get_value_and_holder();
  if (!v_h.holder_constructed()) {
    raise_error(OPRT_ERR_INVALID_ARG, "Descriptor was not made by its constructor");
  }
  return *static_cast<Descriptor*>(v_h.value_ptr());
}

py::list operators() {
  py::list table;
  const int32_t count = oprt_operator_count();
  for (int32_t i = 0; i < count; ++i) {
    const oprt_operator_t* op = oprt_operator_at(i);
    py::tuple input_names(op->num_inputs);
    for (int32_t j = 0; j < op->num_inputs; ++j) input_names[j] = py::str(op->input_names[j]);
    py::tuple param_names(op->num_params);
    py::tuple param_defaults(op->num_params);
    for (int32_t j = 0; j < op->num_params; ++j) {
      param_names[j] = py::str(op->param_names[j]);
      param_defaults[j] = py::float_(op->param_defaults[j]);
    }
    table.append(py::make_tuple(op->name, static_cast<int>(op->kind), input_names, param_names,
                                param_defaults));
  }
  return table;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Thin binding over the operator_runtime C ABI (use the operator_runtime package).";

  PyObject* error_type =
      PyErr_NewException("operator_runtime._C.Error", PyExc_RuntimeError, nullptr);
  m.add_object("Error", py::handle(error_type));

#define OPRT_EXPORT_CONSTANT(name) m.attr(#name) = static_cast<int>(name)
  OPRT_EXPORT_CONSTANT(OPRT_SUCCESS);
  OPRT_EXPORT_CONSTANT(OPRT_ERR_INVALID_ARG);
  OPRT_EXPORT_CONSTANT(OPRT_ERR_UNSUPPORTED_DTYPE);
  OPRT_EXPORT_CONSTANT(OPRT_ERR_RUNTIME);
  OPRT_EXPORT_CONSTANT(OPRT_ERR_INSUFFICIENT_WORKSPACE);
  OPRT_EXPORT_CONSTANT(OPRT_ERR_NOT_SUPPORTED);
  OPRT_EXPORT_CONSTANT(OPRT_DTYPE_F16);
  OPRT_EXPORT_CONSTANT(OPRT_DTYPE_F32);
  OPRT_EXPORT_CONSTANT(OPRT_DTYPE_BF16);
  OPRT_EXPORT_CONSTANT(OPRT_BACKEND_AUTO);
  OPRT_EXPORT_CONSTANT(OPRT_BACKEND_NVIDIA);
  OPRT_EXPORT_CONSTANT(OPRT_BACKEND_METAX);
  OPRT_EXPORT_CONSTANT(OPRT_BACKEND_CPU);
  OPRT_EXPORT_CONSTANT(OPRT_KIND_ELEMENTWISE);
  OPRT_EXPORT_CONSTANT(OPRT_KIND_REDUCTION);
  OPRT_EXPORT_CONSTANT(OPRT_KIND_NORMALIZATION);
  OPRT_EXPORT_CONSTANT(OPRT_MAX_DIMS);
#undef OPRT_EXPORT_CONSTANT

  oprt_python::add_cached_call(m, error_type);
  oprt_python::run_cpu_pieces_on_torch_threads();

  m.def(
      "register_torch_kernels",
      [](const std::string& ns, const std::vector<std::tuple<std::string, int, bool, std::string>>&
                                    ops) {
        std::vector<oprt_python::TorchKernel> kernels;
        for (const auto& [op, index, out_variant, python_op] : ops) {
          kernels.push_back({op, static_cast<int32_t>(index), out_variant, python_op});
        }
        oprt_python::register_torch_kernels(ns, kernels);
      },
      py::arg("namespace"), py::arg("ops"),
      "Registers the C++ CPU and CUDA kernels of ops, given as (op, operator index, "
      "out_variant, python_op); python_op takes every call the C++ fast path does not.");
  m.def(
      "register_autograd_kernels",
      [](const std::string& ns, const std::vector<std::pair<std::string, bool>>& ops,
         const std::string& refuse_tangent) {
        std::vector<oprt_python::AutogradOp> autograd_ops;
        for (const auto& [op, has_gradient] : ops) autograd_ops.push_back({op, has_gradient});
        oprt_python::register_autograd_kernels(ns, autograd_ops, refuse_tangent);
      },
      py::arg("namespace"), py::arg("ops"), py::arg("refuse_tangent"),
      "Registers the C++ autograd kernel of ops ((name, has_gradient) pairs) for CPU and "
      "CUDA tensors: a tangent calls the op refuse_tangent(op, role), which raises; calls "
      "that need a gradient run the formula torch.library.register_autograd registered; "
      "the others go straight below autograd.");
  m.def(
      "set_backend_table",
      [](const std::vector<int32_t>& codes) { oprt_python::set_backend_table(codes); },
      py::arg("codes"),
      "What backends.resolve answers, for the C++ kernels: codes[slot * 2 + device] for "
      "backend slot (None, 'cpu', 'nvidia', 'metax') and device (cpu, cuda), -1 for the "
      "Python path.");

  m.def("operators", &operators,
        "The built-in operators as (name, kind, input_names, param_names, param_defaults).");
  m.def(
      "status_string",
      [](int status) { return std::string(oprt_status_string(static_cast<oprt_status_t>(status))); },
      py::arg("status"));
  m.def(
      "backend_string",
      [](int backend) {
        return std::string(oprt_backend_string(static_cast<oprt_backend_t>(backend)));
      },
      py::arg("backend"));
  m.def(
      "backend_available",
      [](int backend) { return oprt_backend_available(static_cast<oprt_backend_t>(backend)) != 0; },
      py::arg("backend"));

  py::class_<Descriptor>(m, "Descriptor")
      .def(py::init<const std::string&, int, py::handle, py::sequence, py::sequence>(),
           py::arg("op_name"), py::arg("backend"), py::arg("out_view"), py::arg("input_views"),
           py::arg("params"),
           "Creates an operator descriptor on the given backend; a view is "
           "(data_ptr, dtype, shape, strides) with strides in elements.")
      .def(
          "execute",
          [](py::handle self, uintptr_t out, py::handle inputs, uintptr_t stream,
             uintptr_t workspace, size_t workspace_size) {
            constructed(self).execute(out, inputs, stream, workspace, workspace_size);
          },
          py::arg("out_ptr"), py::arg("input_ptrs"), py::arg("stream") = 0,
          py::arg("workspace_ptr") = 0, py::arg("workspace_size") = 0,
          "Launches on stream (0 = default) with raw data pointers; never synchronises.")
      .def(
          "run",
          [](py::handle self, py::handle out, py::sequence inputs, int64_t device,
             uintptr_t stream, uintptr_t workspace, size_t workspace_size) {
            constructed(self).run(out, inputs, device, stream, workspace, workspace_size);
          },
          py::arg("out"), py::arg("inputs"), py::arg("device"), py::arg("stream") = 0,
          py::arg("workspace_ptr") = 0, py::arg("workspace_size") = 0,
          "Launches on the tensors themselves (device: their get_device()), after checking "
          "that their layout is still create's and that they lie inside their storage.")
      .def(
          "check_bound",
          [](py::handle self, py::handle out, py::sequence inputs, int64_t device) {
            void* out_ptr = nullptr;
            const void* input_ptrs[kMaxInputs];
            constructed(self).read_bound(out, inputs, device, &out_ptr, input_ptrs);
          },
          py::arg("out"), py::arg("inputs"), py::arg("device"),
          "Raises unless the tensors still have the layouts the descriptor was created for, "
          "on device, inside their storage (what run() checks, without running).")
      .def(
          "prepared_id",
          [](py::handle self, int64_t device) { return constructed(self).prepared_id(device); },
          py::arg("device"),
          "Registers the descriptor for torch's oprt::_prepared_run op (tensors on device, "
          "their get_device()) and returns the id that op takes.")
      .def(
          "destroy", [](py::handle self) { constructed(self).destroy(); },
          "Releases the descriptor; later calls are errors.")
      .def_property_readonly(
          "plan", [](py::handle self) { return constructed(self).plan(); },
          "The validated plan the descriptor runs (oprt_descriptor_plan) as a dict: kind, "
          "dtype, num_inputs, shape, out_strides, in_strides (dims outermost first, strides "
          "in elements); elementwise adds numel and contiguous, the reduction family rows, "
          "row_length, in_axis_strides, out_axis_stride, row_splits, splits_share_cluster.")
      .def_property_readonly(
          "workspace_size", [](py::handle self) { return constructed(self).workspace_size(); })
      .def_property_readonly("backend",
                             [](py::handle self) { return constructed(self).backend(); })
      .def_property_readonly("op_name",
                             [](py::handle self) { return constructed(self).op_name(); })
      .def_property_readonly("destroyed",
                             [](py::handle self) { return constructed(self).destroyed(); });
}
