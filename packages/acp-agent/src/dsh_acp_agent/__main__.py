"""``python -m dsh_acp_agent``: the same as the ``dsh-acp-agent`` console script."""

from dsh_acp_agent._main import main

main()
