from apps.accounts.models.audit import AuditCategory, AuditEvent, AuditResult
from apps.accounts.models.auth import Invite, OAuthConnection, Passkey, Verification
from apps.accounts.models.campaigns import (
    CampaignOrigin,
    CampaignState,
    Referral,
    ReferralStatus,
    UserTipsEmailOptOut,
    UserUsageCampaign,
    UserUsageCampaignSend,
)
from apps.accounts.models.feedback import FeedbackCategory, FeedbackStatus, PlatformFeedback
from apps.accounts.models.flags import (
    FeatureFlag,
    FeatureFlagExposureRollup,
    FeatureFlagUserOverride,
)
from apps.accounts.models.identity import (
    EmailClaimStatus,
    EmailVerification,
    PasswordReset,
    PendingEmailChange,
    PendingEmailClaimRelease,
    UserEmailClaim,
    UsernameRedirect,
)
from apps.accounts.models.oauth import OAuthGrant
from apps.accounts.models.operations import (
    AccountDeletion,
    AccountWriteLeaseRepair,
    DeletionStatus,
    McpAgentSession,
)
from apps.accounts.models.platform import (
    PlatformOAuthApp,
    PlatformProviderMark,
    SiteBanner,
    SiteBannerDismissal,
)
from apps.accounts.models.tokens import AccessToken as AccessToken
from apps.accounts.models.tokens import TokenKind as TokenKind
from apps.accounts.models.users import Plan, User

__all__ = [
    "AccountDeletion",
    "DeletionStatus",
    "AccessToken",
    "AccountWriteLeaseRepair",
    "AuditCategory",
    "AuditEvent",
    "AuditResult",
    "CampaignOrigin",
    "CampaignState",
    "EmailClaimStatus",
    "EmailVerification",
    "FeatureFlag",
    "FeatureFlagExposureRollup",
    "FeatureFlagUserOverride",
    "FeedbackCategory",
    "FeedbackStatus",
    "Invite",
    "McpAgentSession",
    "OAuthConnection",
    "OAuthGrant",
    "Passkey",
    "PasswordReset",
    "PendingEmailChange",
    "PendingEmailClaimRelease",
    "Plan",
    "PlatformFeedback",
    "PlatformOAuthApp",
    "PlatformProviderMark",
    "Referral",
    "ReferralStatus",
    "SiteBanner",
    "SiteBannerDismissal",
    "TokenKind",
    "User",
    "UserEmailClaim",
    "UserTipsEmailOptOut",
    "UserUsageCampaign",
    "UserUsageCampaignSend",
    "UsernameRedirect",
    "Verification",
]
