// The Python module `_C`. Importing it runs the static TORCH_LIBRARY registrations of the library's
// other translation units; the ops themselves are reached through torch.ops.yirage, never from here.
// It carries only the non-op API: which CPU kernel variant (ISA) runs, and a way to narrow it.
#include <Python.h>

#include "kernels/cpu/isa.h"

namespace {

namespace k = yirage::kernels::cpu;

PyObject* cpu_isa(PyObject*, PyObject*) { return PyUnicode_FromString(k::isa_name(k::active_isa())); }

PyObject* cpu_best_isa(PyObject*, PyObject*) { return PyUnicode_FromString(k::isa_name(k::best_isa())); }

PyObject* set_cpu_isa(PyObject*, PyObject* arg) {
  const char* name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : nullptr;
  k::Isa isa;
  if (name == nullptr || !k::parse_isa(name, &isa)) {
    PyErr_Format(PyExc_ValueError, "set_cpu_isa: expected one of 'generic', 'avx2', 'avx512', got %R", arg);
    return nullptr;
  }
  if (!k::set_isa(isa)) {
    PyErr_Format(PyExc_ValueError, "set_cpu_isa: this CPU does not support '%s' (best: '%s')", name,
                 k::isa_name(k::best_isa()));
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"cpu_isa", cpu_isa, METH_NOARGS, "The CPU kernel variant in use: 'generic', 'avx2' or 'avx512'."},
    {"cpu_best_isa", cpu_best_isa, METH_NOARGS, "The widest CPU kernel variant this CPU supports."},
    {"set_cpu_isa", set_cpu_isa, METH_O, "Select the CPU kernel variant (not wider than cpu_best_isa())."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

#define YR_CONCAT_(a, b) a##b
#define YR_CONCAT(a, b) YR_CONCAT_(a, b)
#define YR_STR_(a) #a
#define YR_STR(a) YR_STR_(a)

PyMODINIT_FUNC YR_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, YR_STR(TORCH_EXTENSION_NAME),
                               "yirage_ext native library (ops register with torch.ops.yirage on import)", -1,
                               methods};
  return PyModule_Create(&module);
}
