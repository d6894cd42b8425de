"""``python -m dsh_acp_agent``: the same as the ``dsh-acp-agent`` console script."""

from dsh_acp_agent._main import main

# Guarded so that importing every module of the package (nox -s build) starts no agent.
if __name__ == "__main__":
    main()
