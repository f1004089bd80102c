"""Public (shared) tables of the packages domain, split by concept."""

from apps.packages.models.access import (
    PackageInvocationToken,
    PackageScopeGrant,
    PackageShareGrant,
    WebhookEndpoint,
)
from apps.packages.models.codemods import PackageCodemodRun, PackageCodemodRunItem
from apps.packages.models.gitstore import RepoToken, SourceRepoRef
from apps.packages.models.integrations import (
    IntegrationProvider,
    RemoteConnectorSetting,
    UserIntegration,
    UserOauthApp,
    UserOpenapiBinding,
    UserOpenapiBindingOperation,
)
from apps.packages.models.mcp import (
    McpMemory,
    McpMemoryConversationSuppression,
    McpServerSetting,
    McpUserServerInstructions,
)
from apps.packages.models.runtime import (
    AgentPackageConversationUse,
    PackageServiceState,
    RepoSessionDueOwner,
    RepoSessionStorageBucketCursor,
    SearchIndexDebt,
    UserStorageBucket,
    VectorEmbedFingerprint,
)
from apps.packages.models.secrets import (
    SecretBucket,
    SecretEntry,
    SecretProviderBinding,
    SecretProviderGrant,
    ValueBucket,
    ValueEntry,
)
from apps.packages.models.sources import (
    EntitySource,
    EntitySourceArtifactsPushSubscription,
    PackageKodyIdRedirect,
    PublishedBundleArtifact,
    SavedPackage,
    SavedPackageSearchIndexDebt,
    UserRepo,
)

__all__ = [
    "AgentPackageConversationUse",
    "EntitySource",
    "EntitySourceArtifactsPushSubscription",
    "McpMemory",
    "McpMemoryConversationSuppression",
    "McpServerSetting",
    "McpUserServerInstructions",
    "PackageCodemodRun",
    "PackageCodemodRunItem",
    "PackageInvocationToken",
    "PackageKodyIdRedirect",
    "PackageScopeGrant",
    "PackageServiceState",
    "PackageShareGrant",
    "PublishedBundleArtifact",
    "RemoteConnectorSetting",
    "RepoSessionDueOwner",
    "RepoToken",
    "RepoSessionStorageBucketCursor",
    "SavedPackage",
    "SavedPackageSearchIndexDebt",
    "SecretBucket",
    "SecretEntry",
    "SecretProviderBinding",
    "SecretProviderGrant",
    "SourceRepoRef",
    "IntegrationProvider",
    "UserIntegration",
    "UserOauthApp",
    "UserOpenapiBinding",
    "UserOpenapiBindingOperation",
    "UserRepo",
    "UserStorageBucket",
    "ValueBucket",
    "ValueEntry",
    "SearchIndexDebt",
    "VectorEmbedFingerprint",
    "WebhookEndpoint",
]
