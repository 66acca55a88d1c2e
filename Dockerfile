# The accurate-controller image that controller/config/manager/deployment.yaml runs
# (ghcr.io/accurate-py/accurate-py). Built and pushed by .github/workflows/release.yml.
#
# It runs as the non-root user 65532 the Deployment's securityContext names, and writes
# nothing at run time, so the root filesystem can be read-only: the dependencies are
# installed, with their bytecode compiled, in the build stage.
FROM python:3.12-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY libaccurate ./libaccurate
COPY kubectl_accurate ./kubectl_accurate
COPY controller ./controller
RUN python -m venv /opt/accurate \
    && /opt/accurate/bin/pip install --no-cache-dir --compile . \
    && /opt/accurate/bin/pip uninstall --yes pip

FROM python:3.12-slim
LABEL org.opencontainers.image.source="https://github.com/accurate-py/accurate-py" \
      org.opencontainers.image.description="accurate-controller: soft multi-tenancy for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/accurate/bin:$PATH
COPY --from=build /opt/accurate /opt/accurate
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["accurate-controller"]
