# rayqueue on the official Ray image. The Ray version must equal the one pyproject.toml pins
# (tests/deploy checks it): the job API client and the cluster must speak the same version.
ARG RAY_VERSION=2.60.0
FROM rayproject/ray:${RAY_VERSION}-py311

# The rayproject images run as their own non-root user: ray (uid 1000, group users, gid 100).
USER ray
WORKDIR /home/ray/rayqueue

COPY --chown=1000:100 pyproject.toml README.md LICENSE ./
COPY --chown=1000:100 specs ./specs
COPY --chown=1000:100 reconciler ./reconciler
COPY --chown=1000:100 api ./api
# The examples ride along: `rayqueue serve` runs in this directory, so the working_dir of
# examples/tasks/working-dir.yaml (examples/scheduler, relative) resolves here.
COPY --chown=1000:100 examples ./examples
RUN pip install --no-cache-dir . && rayqueue --help > /dev/null

# The tasks folder; mount the real one over it (compose: ./tasks:/tasks).
USER root
RUN install -d -o 1000 -g 100 -m 0775 /tasks
USER ray

ENV PYTHONUNBUFFERED=1
EXPOSE 8264
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD python -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8264/healthz', timeout=2).status == 200 else 1)"

# Extra arguments are appended: `docker run IMAGE --address http://head:8265`. With no Ray
# address (flag or RAY_DASHBOARD_ADDRESS), serve starts a private Ray head in the container.
# It listens on 0.0.0.0, so it needs a token (--token-file /run/secrets/..., or
# RAYQUEUE_API_TOKEN) and refuses to start without one; see docs/deploy.md.
ENTRYPOINT ["rayqueue", "serve", "--dir", "/tasks", "--host", "0.0.0.0"]
CMD []
