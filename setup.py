"""Builds yirage_ext: the CPU library always, the CUDA kernels when a CUDA toolkit and a CUDA build of
torch are present (hipified for a ROCm torch). Options are environment variables (USAGE_GUIDE.md).
Build with `pip install --no-build-isolation .` so the library is built against the installed torch."""
import importlib.util
import json
import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(ROOT, "csrc")

_spec = importlib.util.spec_from_file_location("_build_config", os.path.join(ROOT, "yirage_ext", "_build_config.py"))
cfg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cfg)

with_cuda, why = cfg.want_cuda(CSRC)
print(f"yirage_ext: building {'with' if with_cuda else 'without'} CUDA ({why})")
Extension = CUDAExtension if with_cuda else CppExtension
ext = Extension(
    "yirage_ext._C",
    # one file per translation unit (a glue directory is one unit), generated under build/
    [os.path.relpath(s, ROOT) for s in cfg.write_translation_units(CSRC, with_cuda, os.path.join(ROOT, "build", "units"))],
    include_dirs=[CSRC] + cfg.cuda_include_dirs(with_cuda),
    extra_compile_args={"cxx": cfg.cxx_flags(with_cuda), "nvcc": cfg.nvcc_flags()},
    extra_link_args=cfg.ld_flags(with_cuda),
)


class BuildExt(BuildExtension):
    """Records the torch the library was built against next to it, so the loader can refuse a
    mismatched _C before loading it (an undefined symbol would crash instead)."""

    def build_extension(self, extension):
        super().build_extension(extension)
        record = dict(cfg.torch_identity(), with_cuda=with_cuda, flags=cfg.cxx_flags(with_cuda),
                      arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST", ""), sources=cfg.sources_hash(CSRC))
        out = os.path.join(os.path.dirname(self.get_ext_fullpath(extension.name)), "_C.build.json")
        with open(out, "w") as f:
            json.dump(record, f, indent=1)

    def copy_extensions_to_source(self):
        """--inplace and editable installs: the build record goes next to the copied _C as well."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            package = ext.name.rpartition(".")[0]
            src = os.path.join(self.build_lib, *package.split("."), "_C.build.json")
            shutil.copyfile(src, os.path.join(build_py.get_package_dir(package), "_C.build.json"))


class BuildPy(build_py):
    """Ships the C++/CUDA sources inside the package (yirage_ext/_csrc) for the JIT fallback."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "yirage_ext", "_csrc")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(CSRC, dst, ignore=shutil.ignore_patterns("*.o", "__pycache__"))


version = re.search(r'"(.+)"', open(os.path.join(ROOT, "yirage_ext", "_version.py")).read()).group(1)
setup(
    name="yirage_ext",
    version=version,
    description="Portable fused LLM operators for PyTorch (torch.ops.yirage)",
    packages=["yirage_ext", "yirage_ext.bench", "yirage_ext.testing"],
    python_requires=">=3.9",
    install_requires=["torch>=2.5"],
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt.with_options(no_python_abi_suffix=False), "build_py": BuildPy},
    zip_safe=False,
)
